set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r10-compress.svg'
set key outside right top
set grid
set xlabel 'MB sent'
set ylabel 'held-out loss'
set logscale x 10
plot 'r10-compress.dat' index 0 using 1:2 with points pt 7 ps 1.2 title 'dense (no compression)', \
     'r10-compress.dat' index 1 using 1:2 with points pt 7 ps 1.2 title 'int8', \
     'r10-compress.dat' index 2 using 1:2 with points pt 7 ps 1.2 title '4-bit E3M0', \
     'r10-compress.dat' index 3 using 1:2 with points pt 7 ps 1.2 title '4-bit E3M0 + EF', \
     'r10-compress.dat' index 4 using 1:2 with points pt 7 ps 1.2 title 'top-k 10%', \
     'r10-compress.dat' index 5 using 1:2 with points pt 7 ps 1.2 title 'top-k 10% + EF', \
     'r10-compress.dat' index 6 using 1:2 with points pt 7 ps 1.2 title 'random-k 10%', \
     'r10-compress.dat' index 7 using 1:2 with points pt 7 ps 1.2 title 'random-k 10% + EF', \
     'r10-compress.dat' index 8 using 1:2 with points pt 7 ps 1.2 title 'top-k 1%', \
     'r10-compress.dat' index 9 using 1:2 with points pt 7 ps 1.2 title 'top-k 1% + EF'
