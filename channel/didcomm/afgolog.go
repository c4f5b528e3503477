package didcomm

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	afgolog "github.com/hyperledger/aries-framework-go/pkg/common/log"
	spilog "github.com/hyperledger/aries-framework-go/spi/log"
)

// aries-framework-go logs through a process-wide provider that can be set once, before its first
// log line, and otherwise writes to stderr. afgoLogs is the bridge: installed once, it forwards
// to the slog logger of the most recently opened agent, at debug level (afgo logs expected
// protocol events as errors). This is the package's only global state, imposed by afgo's design.
var afgoLogs struct {
	once   sync.Once
	logger atomic.Pointer[slog.Logger]
}

func bridgeAFGOLogs(l *slog.Logger) {
	afgoLogs.logger.Store(l)
	afgoLogs.once.Do(func() { afgolog.Initialize(afgoProvider{}) })
}

type afgoProvider struct{}

func (afgoProvider) GetLogger(module string) spilog.Logger { return afgoLogger{module: module} }

type afgoLogger struct{ module string }

func (l afgoLogger) log(level string, msg string, args []any) {
	if lg := afgoLogs.logger.Load(); lg != nil {
		lg.Debug("aries-framework-go", "module", l.module, "afgo_level", level, "msg", fmt.Sprintf(msg, args...))
	}
}

func (l afgoLogger) Panicf(msg string, args ...any) {
	l.log("panic", msg, args)
	panic(fmt.Sprintf(msg, args...))
}
func (l afgoLogger) Fatalf(msg string, args ...any) {
	l.log("fatal", msg, args)
	panic(fmt.Sprintf(msg, args...))
}
func (l afgoLogger) Errorf(msg string, args ...any) { l.log("error", msg, args) }
func (l afgoLogger) Warnf(msg string, args ...any)  { l.log("warn", msg, args) }
func (l afgoLogger) Infof(msg string, args ...any)  { l.log("info", msg, args) }
func (l afgoLogger) Debugf(msg string, args ...any) { l.log("debug", msg, args) }
