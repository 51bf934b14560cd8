package caddymodule

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(SyslogEncoder{})
}

// SyslogEncoder (caddy.logging.encoders.syslog) wraps another encoder
// (json by default) and writes each entry as a syslog message the way
// HAProxy's default log format ("local": RFC 3164 without the host name)
// does:
//
//	<134>Dec  1 22:52:50 haproxy[4242]: {"level":"info",…}
//
// the priority being the facility's and the entry's level's (debug 7,
// info 6, warn 4, error 3, dpanic 2, panic 1, fatal 0), the time local,
// then the tag and Caddy's process id. With output net unixgram//dev/log
// (or udp/<host>:514) syslog receives and files Caddy's entries as it did
// HAProxy's: --adapter haproxy writes it for HAProxy's global log lines.
type SyslogEncoder struct {
	zapcore.Encoder `json:"-"`

	// The encoder of the message; json by default.
	WrappedRaw json.RawMessage `json:"wrap,omitempty" caddy:"namespace=caddy.logging.encoders inline_key=format"`

	// The syslog facility: kern, user, mail, daemon, auth, syslog, lpr,
	// news, uucp, cron, auth2, ftp, ntp, audit, alert, cron2, local0 to
	// local7 (HAProxy's names). user by default.
	Facility string `json:"facility,omitempty"`

	// The tag (the program name syslog files by). caddy by default.
	Tag string `json:"tag,omitempty"`

	facility int
	pid      int
}

// syslogFacilities are the facilities by number, as HAProxy names them.
var syslogFacilities = []string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
	"ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

// CaddyModule returns the Caddy module information.
func (SyslogEncoder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.syslog",
		New: func() caddy.Module { return new(SyslogEncoder) },
	}
}

// Provision sets up the encoder.
func (se *SyslogEncoder) Provision(ctx caddy.Context) error {
	if se.Facility == "" {
		se.Facility = "user"
	}
	se.facility = slices.Index(syslogFacilities, se.Facility)
	if se.facility < 0 {
		return fmt.Errorf("syslog facility %q: want one of %v", se.Facility, syslogFacilities)
	}
	if se.Tag == "" {
		se.Tag = "caddy"
	}
	se.pid = os.Getpid()
	if se.WrappedRaw == nil {
		enc := new(logging.JSONEncoder)
		if err := enc.Provision(ctx); err != nil {
			return fmt.Errorf("provisioning the json encoder: %v", err)
		}
		se.Encoder = enc
		return nil
	}
	val, err := ctx.LoadModule(se, "WrappedRaw")
	if err != nil {
		return fmt.Errorf("loading the wrapped encoder: %v", err)
	}
	se.Encoder = val.(zapcore.Encoder)
	return nil
}

// UnmarshalCaddyfile sets up the encoder from Caddyfile tokens:
//
//	format syslog {
//		facility <facility>
//		tag      <tag>
//		wrap     <encoder> ...
//	}
func (se *SyslogEncoder) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the encoder's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "facility", "tag":
			key := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			if key == "facility" {
				se.Facility = d.Val()
			} else {
				se.Tag = d.Val()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "wrap":
			if !d.NextArg() {
				return d.ArgErr()
			}
			name := d.Val()
			unm, err := caddyfile.UnmarshalModule(d, "caddy.logging.encoders."+name)
			if err != nil {
				return err
			}
			enc, ok := unm.(zapcore.Encoder)
			if !ok {
				return d.Errf("module %s (%T) is not a zapcore.Encoder", name, unm)
			}
			se.WrappedRaw = caddyconfig.JSONModuleObject(enc, "format", name, nil)
		default:
			return d.Errf("unrecognized subdirective %s", d.Val())
		}
	}
	return nil
}

// Clone implements zapcore.Encoder.
func (se SyslogEncoder) Clone() zapcore.Encoder {
	se.Encoder = se.Encoder.Clone()
	return se
}

// EncodeEntry implements zapcore.Encoder.
func (se SyslogEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	msg, err := se.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return nil, err
	}
	defer msg.Free()
	out := syslogBuffers.Get()
	out.AppendByte('<')
	out.AppendInt(int64(se.facility*8 + syslogSeverity(ent.Level)))
	out.AppendByte('>')
	out.AppendString(ent.Time.Format(time.Stamp))
	out.AppendByte(' ')
	out.AppendString(se.Tag)
	out.AppendString("[" + strconv.Itoa(se.pid) + "]: ")
	out.AppendBytes(msg.Bytes())
	return out, nil
}

var syslogBuffers = buffer.NewPool()

// syslogSeverity is the syslog severity of a zap level.
func syslogSeverity(l zapcore.Level) int {
	switch l {
	case zapcore.DebugLevel:
		return 7
	case zapcore.WarnLevel:
		return 4
	case zapcore.ErrorLevel:
		return 3
	case zapcore.DPanicLevel:
		return 2
	case zapcore.PanicLevel:
		return 1
	case zapcore.FatalLevel:
		return 0
	}
	return 6 // info
}

// Interface guards
var (
	_ zapcore.Encoder       = (*SyslogEncoder)(nil)
	_ caddy.Provisioner     = (*SyslogEncoder)(nil)
	_ caddyfile.Unmarshaler = (*SyslogEncoder)(nil)
)
