set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r3-staleness-exponential.svg'
set key outside right top
set grid
set xlabel 'staleness τ (versions)'
set ylabel 'fraction of gradients'
set logscale y
set xrange [0:64]
plot 'r3-staleness-exponential.dat' index 0 using 1:2 with steps lw 1.5 title 'n=1', \
     'r3-staleness-exponential.dat' index 1 using 1:2 with steps lw 1.5 title 'n=2', \
     'r3-staleness-exponential.dat' index 2 using 1:2 with steps lw 1.5 title 'n=5', \
     'r3-staleness-exponential.dat' index 3 using 1:2 with steps lw 1.5 title 'n=15', \
     'r3-staleness-exponential.dat' index 4 using 1:2 with steps lw 1.5 title 'n=30'
