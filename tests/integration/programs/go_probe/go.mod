module go_probe

go 1.19
