set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r5-throughput-8.svg'
set key outside right top
set grid
set xlabel 'communication / computation ρ'
set ylabel 'samples per virtual second'
set yrange [0:*]
plot 'r5-throughput-8.dat' index 0 using 1:2 with linespoints lw 1.5 title 'ssgd', \
     'r5-throughput-8.dat' index 1 using 1:2 with linespoints lw 1.5 title 'asgd', \
     'r5-throughput-8.dat' index 2 using 1:2 with linespoints lw 1.5 title 'odsgd'
