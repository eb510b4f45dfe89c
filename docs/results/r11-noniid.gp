set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r11-noniid.svg'
set key outside right top
set grid
set xlabel 'split'
set ylabel 'test accuracy'
set xtics ('iid' 0, 'Dirichlet 1' 1, 'Dirichlet 0.1' 2)
plot 'r11-noniid.dat' index 0 using 1:2 with linespoints lw 1.5 title 'ssgd', \
     'r11-noniid.dat' index 1 using 1:2 with linespoints lw 1.5 title 'asgd', \
     'r11-noniid.dat' index 2 using 1:2 with linespoints lw 1.5 title 'localsgd', \
     'r11-noniid.dat' index 3 using 1:2 with linespoints lw 1.5 title 'diloco'
