set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r9-toy-time.svg'
set key outside right top
set grid
set xlabel 'virtual seconds'
set ylabel 'held-out loss'
plot 'r9-toy-time.dat' index 0 using 1:2 with lines lw 1.5 title 'sync-hb', \
     'r9-toy-time.dat' index 1 using 1:2 with lines lw 1.5 title 'async-hb', \
     'r9-toy-time.dat' index 2 using 1:2 with lines lw 1.5 title 'sync-nesterov', \
     'r9-toy-time.dat' index 3 using 1:2 with lines lw 1.5 title 'async-naive', \
     'r9-toy-time.dat' index 4 using 1:2 with lines lw 1.5 title 'async-dn', \
     'r9-toy-time.dat' index 5 using 1:2 with lines lw 1.5 title 'async-dn-dylu'
