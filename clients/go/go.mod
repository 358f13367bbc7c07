module chronoq

go 1.19
