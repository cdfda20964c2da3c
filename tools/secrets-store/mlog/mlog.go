// Package mlog stands in for monis.app/mlog, a logging helper over klog that the Secrets Store CSI
// driver's command and server call, and that the module proxy this project builds from does not
// serve. It provides exactly the calls the driver makes (README.md): logs go to klog as the
// driver's other lines do, and a fatal error exits with status 1 as mlog's does. Nothing else of
// mlog is reproduced: it is a build shim for the local cluster's driver, not a library.
package mlog

import (
	"context"

	"k8s.io/klog/v2"
)

// LogFormat is the log format the driver's --log-format-json chooses; klog's text is kept either way.
type LogFormat string

const (
	FormatText LogFormat = "text"
	FormatJSON LogFormat = "json"
)

// Setup returns what the driver defers at exit: flushing klog.
func Setup() func() { return klog.Flush }

// ValidateAndSetKlogLevelAndFormatGlobally leaves klog as its flags set it (-v).
func ValidateAndSetKlogLevelAndFormatGlobally(_ context.Context, _ klog.Level, _ LogFormat) error {
	return nil
}

// Error logs an error with its message.
func Error(msg string, err error, keysAndValues ...any) { klog.ErrorS(err, msg, keysAndValues...) }

// Fatal logs the error and exits with status 1.
func Fatal(err error, keysAndValues ...any) {
	klog.ErrorS(err, "fatal error", keysAndValues...)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}
