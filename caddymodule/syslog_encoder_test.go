package caddymodule

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap/zapcore"
)

// An entry is a syslog message as HAProxy's default format writes one:
// <facility*8+severity>, the local time, the tag and the process id, then
// the wrapped encoder's text.
func TestSyslogEncoder(t *testing.T) {
	d := caddyfile.NewTestDispenser("syslog {\n\tfacility local1\n\ttag edge\n}")
	se := new(SyslogEncoder)
	if err := se.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	if err := se.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)
	for level, pri := range map[zapcore.Level]int{zapcore.InfoLevel: 17*8 + 6, zapcore.WarnLevel: 17*8 + 4, zapcore.ErrorLevel: 17*8 + 3, zapcore.DebugLevel: 17*8 + 7} {
		enc := se.Clone()
		buf, err := enc.EncodeEntry(zapcore.Entry{Level: level, Time: at, LoggerName: "http.log.access", Message: "handled request"},
			[]zapcore.Field{{Key: "status", Type: zapcore.Int64Type, Integer: 200}})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("<%d>Mar  4 05:06:07 edge[%d]: {", pri, os.Getpid())
		if got := buf.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, `"status":200`) || !strings.HasSuffix(got, "}\n") {
			t.Errorf("level %s: %q, want %q…", level, got, want)
		}
	}
	if err := (&SyslogEncoder{Facility: "local9"}).Provision(ctx); err == nil {
		t.Error("facility local9 accepted")
	}
}
