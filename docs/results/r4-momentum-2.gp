set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r4-momentum-2.svg'
set key outside right top
set grid
set xlabel 'updates'
set ylabel 'train loss (mean of the seeds)'
set logscale y
plot 'r4-momentum-2.dat' index 0 using 1:2 with lines lw 1.5 title 'sgd', \
     'r4-momentum-2.dat' index 1 using 1:2 with lines lw 1.5 title 'asgd2', \
     'r4-momentum-2.dat' index 2 using 1:2 with lines lw 1.5 title 'hb2'
