set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r6-dcasgd.svg'
set key outside right top
set grid
set xlabel 'workers'
set ylabel 'final test error'
set logscale x 2
plot 'r6-dcasgd.dat' index 0 using 1:2 with linespoints lw 1.5 title 'asgd', \
     'r6-dcasgd.dat' index 1 using 1:2 with linespoints lw 1.5 title 'dc-const', \
     'r6-dcasgd.dat' index 2 using 1:2 with linespoints lw 1.5 title 'dc-adaptive'
