set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r2-slowdown.svg'
set key outside right top
set grid
set xlabel 'staleness bound s'
set ylabel 'updates to target / at s=0'
set logscale x 2
set xrange [0.8:80]
plot 'r2-slowdown.dat' index 0 using 1:2 with linespoints lw 1.5 title 'logreg, sgd', \
     'r2-slowdown.dat' index 1 using 1:2 with linespoints lw 1.5 title 'mlp 256-10, sgd', \
     'r2-slowdown.dat' index 2 using 1:2 with linespoints lw 1.5 title 'mlp 256-256-256-10, sgd', \
     'r2-slowdown.dat' index 3 using 1:2 with linespoints lw 1.5 title 'logreg, momentum', \
     'r2-slowdown.dat' index 4 using 1:2 with linespoints lw 1.5 title 'mlp 256-10, momentum', \
     'r2-slowdown.dat' index 5 using 1:2 with linespoints lw 1.5 title 'mlp 256-256-256-10, momentum', \
     'r2-slowdown.dat' index 6 using 1:2 with linespoints lw 1.5 title 'lenet5, sgd', \
     'r2-slowdown.dat' index 7 using 1:2 with linespoints lw 1.5 title 'lenet5, momentum'
