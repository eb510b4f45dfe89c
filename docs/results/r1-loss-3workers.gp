set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r1-loss-3workers.svg'
set key outside right top
set grid
set xlabel 'processed batches'
set ylabel 'train loss'
set logscale y
set yrange [0.25:3]
plot 'r1-loss-3workers.dat' index 0 using 1:2 with lines lw 1.5 title 'sequential', \
     'r1-loss-3workers.dat' index 1 using 1:2 with lines lw 1.5 title 'sync 3', \
     'r1-loss-3workers.dat' index 2 using 1:2 with lines lw 1.5 title 'sync 3, lr ×3', \
     'r1-loss-3workers.dat' index 3 using 1:2 with lines lw 1.5 title 'async 3, d=0', \
     'r1-loss-3workers.dat' index 4 using 1:2 with lines lw 1.5 title 'async 3, d=1', \
     'r1-loss-3workers.dat' index 5 using 1:2 with lines lw 1.5 title 'async 3, d=2', \
     'r1-loss-3workers.dat' index 6 using 1:2 with lines lw 1.5 title 'async 3, d=3', \
     'r1-loss-3workers.dat' index 7 using 1:2 with lines lw 1.5 title 'async 3, d=4'
