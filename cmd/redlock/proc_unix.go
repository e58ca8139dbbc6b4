//go:build unix

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// onTerminal reports whether standard input is redlock's controlling
// terminal.
func onTerminal() bool {
	_, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil
}

// inForeground reports whether redlock's process group is the terminal's
// foreground group: the one the terminal sends Ctrl-C to.
func inForeground() bool {
	fg, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && fg == syscall.Getpgrp()
}

// signalProcess sends sig to pid, or to the process group it leads.
func signalProcess(pid int, group bool, sig syscall.Signal) error {
	if group {
		return syscall.Kill(-pid, sig)
	}
	return syscall.Kill(pid, sig)
}
