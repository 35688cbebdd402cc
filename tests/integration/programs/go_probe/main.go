// A Go program (cgo-linked when built with CGO_ENABLED=1: cgo.go) for test_go_programs.py: GOPROBE CASE DIR (preempt: goroutines spinning past
// the runtime's preemption signal; child: children whose SIGCHLD the runtime handles; writeat: a WriteAt(0)
// of a guarded file opened read-write).
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

func spin(d time.Duration) int {
	end := time.Now().Add(d)
	n := 0
	for time.Now().Before(end) {
		n++
	}
	return n
}

func main() {
	dir := os.Args[2]
	switch os.Args[1] {
	case "preempt":
		done := make(chan int)
		for i := 0; i < 4; i++ {
			go func() { done <- spin(400 * time.Millisecond) }()
		}
		for i := 0; i < 4; i++ {
			<-done
		}
		fmt.Println("preempt_ok=1")
	case "child":
		for i := 0; i < 5; i++ {
			if err := exec.Command("/bin/true").Run(); err != nil {
				fmt.Println("child_err=", err)
				os.Exit(1)
			}
		}
		fmt.Println("child_ok=1")
	case "writeat":
		f, err := os.OpenFile(filepath.Join(dir, "g.log"), os.O_RDWR|os.O_CREATE, 0644)
		if err != nil {
			fmt.Println("open_err=", err)
			os.Exit(1)
		}
		f.Write([]byte("0123456789"))
		_, err = f.WriteAt([]byte("XX"), 0)
		fmt.Printf("writeat_err=%v\n", err != nil)
		f.Close()
	}
}
