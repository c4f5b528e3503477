//go:build !linux

package main

import "syscall"

func childOfTest() *syscall.SysProcAttr { return nil }
