package main

import "syscall"

// childOfTest makes a process started by a test die with the test binary, even when the binary
// is killed (a test timeout) before its cleanup can stop it.
func childOfTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
