set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r4-mu.svg'
set key outside right top
set grid
set xlabel 'explicit momentum µ'
set ylabel 'updates to 0.8 (best lr, mean of the seeds)'
set logscale y
plot 'r4-mu.dat' index 0 using 1:2 with linespoints lw 1.5 title 'M=1', \
     'r4-mu.dat' index 1 using 1:2 with linespoints lw 1.5 title 'M=2', \
     'r4-mu.dat' index 2 using 1:2 with linespoints lw 1.5 title 'M=4', \
     'r4-mu.dat' index 3 using 1:2 with linespoints lw 1.5 title 'M=8'
