//go:build unix && !linux

package main

import "syscall"

// procAttr starts the command in its own process group when ownGroup is
// set. Only Linux has a parent-death signal: elsewhere, a command whose
// redlock died runs on without the lock's renewal.
func procAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
