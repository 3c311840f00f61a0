package main

import "fmt"

func registration(cmd string, args []string) int {
	fmt.Println(cmd, args)
	return 2
}
