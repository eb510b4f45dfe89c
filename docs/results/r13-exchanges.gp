set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r13-exchanges.svg'
set key outside right top
set grid
set xlabel 'MB sent (all workers)'
set ylabel 'held-out loss per token'
set logscale x 10
plot 'r13-exchanges.dat' index 0 using 1:2 with points pt 7 ps 1.2 title 'ssgd', \
     'r13-exchanges.dat' index 1 using 1:2 with points pt 7 ps 1.2 title 'diloco', \
     'r13-exchanges.dat' index 2 using 1:2 with points pt 7 ps 1.2 title 'streaming', \
     'r13-exchanges.dat' index 3 using 1:2 with points pt 7 ps 1.2 title 'sparta', \
     'r13-exchanges.dat' index 4 using 1:2 with points pt 7 ps 1.2 title 'demo'
