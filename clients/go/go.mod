module plimsoll

go 1.19
