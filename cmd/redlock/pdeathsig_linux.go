package main

import "syscall"

// procAttr starts the command in its own process group when ownGroup is
// set, and has the kernel kill it if redlock dies (a parent-death signal,
// SIGKILL): without redlock the lock is no longer renewed.
func procAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}
