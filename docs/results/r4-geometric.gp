set terminal svg size 760,440 dynamic noenhanced font 'sans,11'
set output 'r4-geometric.svg'
set key outside right top
set grid
set xlabel 'staleness τ'
set ylabel 'fraction of updates'
set logscale y
set xrange [0:64]
set yrange [1e-5:1]
plot 'r4-geometric.dat' index 0 using 1:2 with points pt 7 ps 0.5 title 'M=2 measured', \
     'r4-geometric.dat' index 1 using 1:2 with lines lw 1.2 dt 2 title 'M=2 (1-1/M)^l/M', \
     'r4-geometric.dat' index 2 using 1:2 with points pt 7 ps 0.5 title 'M=4 measured', \
     'r4-geometric.dat' index 3 using 1:2 with lines lw 1.2 dt 2 title 'M=4 (1-1/M)^l/M', \
     'r4-geometric.dat' index 4 using 1:2 with points pt 7 ps 0.5 title 'M=8 measured', \
     'r4-geometric.dat' index 5 using 1:2 with lines lw 1.2 dt 2 title 'M=8 (1-1/M)^l/M', \
     'r4-geometric.dat' index 6 using 1:2 with points pt 7 ps 0.5 title 'M=16 measured', \
     'r4-geometric.dat' index 7 using 1:2 with lines lw 1.2 dt 2 title 'M=16 (1-1/M)^l/M'
