//go:build !unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// Outside Unix there are no process groups or terminal foreground groups:
// the command gets signals alone, and no parent-death signal.

func onTerminal() bool   { return false }
func inForeground() bool { return false }

func procAttr(bool) *syscall.SysProcAttr { return nil }

func signalProcess(pid int, _ bool, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		return p.Kill()
	}
	return errors.New("redlock: signal not supported on this system")
}
