package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalNotify returns a context ended by SIGTERM or SIGINT.
func signalNotify() (context.Context, func()) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}
