package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/forwarded"
	"github.com/caddy-ha/caddy-ha/status"
)

func init() {
	caddy.RegisterModule(CloudflareRanges{})
}

// CloudflareRanges is a trusted_proxies source with Cloudflare's IP ranges:
// it downloads the IPv4 and IPv6 lists, saves them to a file, refreshes
// them, and trusts only ranges it has loaded. A failed or malformed
// download keeps the last good set. With downloads off it reads one shared
// copy of the file (e.g. on a shared volume, kept by one instance that
// downloads), and reads it again when it changes.
//
// Instances with the same settings share one set and one refresher, across
// sites, handlers and config reloads.
type CloudflareRanges struct {
	// Where the lists are downloaded from. Defaults:
	// https://www.cloudflare.com/ips-v4 and https://www.cloudflare.com/ips-v6.
	IPv4URL string `json:"ipv4_url,omitempty"`
	IPv6URL string `json:"ipv6_url,omitempty"`
	// The saved copy. Default: cloudflare-ranges.txt in Caddy's data
	// directory.
	File string `json:"file,omitempty"`
	// Read the file only; never download.
	DisableDownloads bool `json:"disable_downloads,omitempty"`
	// How often to download the lists again, or with downloads off, to
	// check the file for a change. Defaults: 24h, or 1m with downloads off.
	Refresh caddy.Duration `json:"refresh,omitempty"`
	// How long a download may take. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	shared *cloudflareSet
	key    string
}

// Cloudflare publishes its ranges here.
const (
	cloudflareIPv4URL = "https://www.cloudflare.com/ips-v4"
	cloudflareIPv6URL = "https://www.cloudflare.com/ips-v6"
)

// CaddyModule returns the Caddy module information.
func (CloudflareRanges) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.ip_sources.cloudflare_ranges", New: func() caddy.Module { return new(CloudflareRanges) }}
}

// cloudflareSets shares one set and refresher per settings.
var cloudflareSets = caddy.NewUsagePool()

// Defaults of cloudflare_ranges, and the first pause after a failed
// download (it doubles up to refresh).
const (
	cloudflareRetryFirst         = 5 * time.Second
	defaultCloudflareFile        = "cloudflare-ranges.txt" // in Caddy's data directory
	defaultCloudflareRefresh     = 24 * time.Hour
	defaultCloudflareFileRefresh = time.Minute // with downloads off
	defaultCloudflareTimeout     = 30 * time.Second
)

// setDefaults fills in what is unset. With downloads off the file is not
// defaulted: it must name the copy another instance keeps.
func (c *CloudflareRanges) setDefaults() {
	c.IPv4URL = cmp.Or(c.IPv4URL, cloudflareIPv4URL)
	c.IPv6URL = cmp.Or(c.IPv6URL, cloudflareIPv6URL)
	if c.File == "" && !c.DisableDownloads {
		c.File = filepath.Join(caddy.AppDataDir(), defaultCloudflareFile)
	}
	if c.Refresh == 0 {
		c.Refresh = caddy.Duration(defaultCloudflareRefresh)
		if c.DisableDownloads {
			c.Refresh = caddy.Duration(defaultCloudflareFileRefresh)
		}
	}
	if c.Timeout == 0 {
		c.Timeout = caddy.Duration(defaultCloudflareTimeout)
	}
}

const cloudflareModule = "cloudflare_ranges"

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (c *CloudflareRanges) Validate() error {
	v := *c
	v.setDefaults()
	switch {
	case v.Refresh < 0:
		return badSetting(cloudflareModule, "refresh", "must not be negative")
	case v.Timeout < 0:
		return badSetting(cloudflareModule, "timeout", "must not be negative")
	case v.File == "":
		return badSetting(cloudflareModule, "file", "must name the shared copy to read, with downloads off")
	}
	return nil
}

// Provision sets the defaults and joins (or starts) the set of these
// settings.
func (c *CloudflareRanges) Provision(ctx caddy.Context) error {
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	c.setDefaults()
	key, err := json.Marshal(c)
	if err != nil {
		return err
	}
	c.key = string(key)
	val, _, err := cloudflareSets.LoadOrNew(c.key, func() (caddy.Destructor, error) {
		return startCloudflareSet(*c), nil
	})
	if err != nil {
		return err
	}
	c.shared = val.(*cloudflareSet)
	return nil
}

// Cleanup lets go of the set; the last user stops its refresher.
func (c *CloudflareRanges) Cleanup() error {
	if c.shared == nil {
		return nil
	}
	_, err := cloudflareSets.Delete(c.key)
	return err
}

// GetIPRanges returns the ranges loaded so far: none before the first
// good list.
func (c *CloudflareRanges) GetIPRanges(*http.Request) []netip.Prefix {
	if p := c.shared.ranges.Load(); p != nil {
		return *p
	}
	return nil
}

// cloudflareSet is one set of ranges and the goroutine that keeps it.
type cloudflareSet struct {
	cfg    CloudflareRanges
	ranges atomic.Pointer[[]netip.Prefix]
	client *http.Client
	seen   os.FileInfo        // the file as last read, with downloads off
	stop   context.CancelFunc // ends the refresher, and a download under way
	done   chan struct{}

	failures prometheus.Counter
	series   *seriesHold[*cloudflareSet]
	// For the operator's view: when the ranges were last fetched, and the
	// last failure.
	mu          sync.Mutex
	refreshedAt time.Time
	failedAt    time.Time
	lastErr     error
}

func startCloudflareSet(cfg CloudflareRanges) *cloudflareSet {
	ctx, stop := context.WithCancel(context.Background())
	s := &cloudflareSet{cfg: cfg, client: &http.Client{Timeout: time.Duration(cfg.Timeout)},
		stop: stop, done: make(chan struct{})}
	s.series = cloudflareSeries.hold(cfg.File) // before its series are looked up
	s.failures = cloudflareMetrics.failures.WithLabelValues(cfg.File)
	s.readFile() // the last good set, until a download succeeds
	s.series.publish(s)
	goLoop(caddy.Log().Named("cloudflare_ranges"), "the Cloudflare ranges' refresher", cloudflareRetryFirst, ctx.Done(), s.done,
		func() { s.keep(ctx) })
	return s
}

// keep refreshes the set until Destruct. A failed download is retried
// sooner than refresh (5s, doubling), so a node that boots while the lists
// cannot be fetched does not go a whole refresh trusting nothing.
func (s *cloudflareSet) keep(ctx context.Context) {
	refresh := time.Duration(s.cfg.Refresh)
	retry := min(cloudflareRetryFirst, refresh)
	for {
		wait := refresh
		if !s.cfg.DisableDownloads && !s.download(ctx) {
			wait, retry = retry, min(2*retry, refresh)
		} else {
			retry = min(cloudflareRetryFirst, refresh)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			if s.cfg.DisableDownloads {
				s.readFileIfChanged()
			}
		}
	}
}

// download fetches, keeps and saves the lists, and reports whether it got
// them. Ending ctx (Destruct) ends a slow download.
func (s *cloudflareSet) download(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
	defer cancel()
	f, err := forwarded.FetchRangeFile(ctx, s.client, s.cfg.IPv4URL, s.cfg.IPv6URL)
	if err != nil {
		s.logger().Warn("downloading Cloudflare's ranges failed; keeping the last good set",
			zap.Error(err), zap.Int("ranges_kept", len(s.current())))
		s.failed(err)
		return false
	}
	s.set(f, time.Now())
	if err := f.Save(s.cfg.File); err != nil {
		s.logger().Warn("saving Cloudflare's ranges failed", zap.String("file", s.cfg.File), zap.Error(err))
	}
	return true
}

// readFileIfChanged reads the file again if it is another file, or the
// same one changed. Save renames a new file over the old one, which a
// rewrite of the same size within the clock's resolution tells apart from
// it only by being another file.
func (s *cloudflareSet) readFileIfChanged() {
	info, err := os.Stat(s.cfg.File)
	if err == nil && s.seen != nil && os.SameFile(info, s.seen) &&
		info.ModTime().Equal(s.seen.ModTime()) && info.Size() == s.seen.Size() {
		return
	}
	s.readFile()
}

func (s *cloudflareSet) readFile() {
	info, statErr := os.Stat(s.cfg.File)
	f, err := forwarded.LoadRangeFile(s.cfg.File)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) || s.cfg.DisableDownloads {
			s.logger().Warn("reading Cloudflare's ranges failed; keeping the last good set", zap.String("file", s.cfg.File),
				zap.Error(err), zap.Int("ranges_kept", len(s.current())))
			s.failed(err)
		}
		if statErr == nil {
			s.seen = info // not again until it changes
		}
		return
	}
	s.seen = info
	s.set(f, info.ModTime())
}

// set trusts the ranges of f, fetched at when.
func (s *cloudflareSet) set(f forwarded.RangeFile, when time.Time) {
	all := f.All()
	s.ranges.Store(&all)
	s.mu.Lock()
	s.refreshedAt = when
	s.mu.Unlock()
	s.logger().Info("Cloudflare's ranges loaded", zap.Int("ipv4", len(f.V4)), zap.Int("ipv6", len(f.V6)))
}

// logger is Caddy's default logger of the moment: the set outlives the
// config that started it, and a reload may send the logs elsewhere.
func (s *cloudflareSet) logger() *zap.Logger {
	return caddy.Log().Named("http.ip_sources.cloudflare_ranges")
}

func (s *cloudflareSet) current() []netip.Prefix {
	if p := s.ranges.Load(); p != nil {
		return *p
	}
	return nil
}

// failed counts a failed download or read, kept for the operator's view.
func (s *cloudflareSet) failed(err error) {
	s.failures.Inc()
	s.mu.Lock()
	s.failedAt, s.lastErr = time.Now(), err
	s.mu.Unlock()
}

// state is the set as the operator's view shows it.
func (s *cloudflareSet) state() status.CloudflareSet {
	st := status.CloudflareSet{File: s.cfg.File, Ranges: len(s.current()), Failures: readMetric(s.failures),
		From: s.cfg.IPv4URL + " " + s.cfg.IPv6URL}
	if s.cfg.DisableDownloads {
		st.From = "file (downloads off)"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refreshedAt.IsZero() {
		t := s.refreshedAt
		st.RefreshedAt = &t
	}
	if s.lastErr != nil {
		t := s.failedAt
		st.FailedAt, st.LastError = &t, s.lastErr.Error()
	}
	return st
}

// Destruct stops the refresher, when the last user lets go of the set,
// and removes its series.
func (s *cloudflareSet) Destruct() error {
	s.stop()
	<-s.done
	s.series.release()
	return nil
}

// UnmarshalCaddyfile sets up the source. Syntax:
//
//	trusted_proxies cloudflare_ranges {
//		ipv4_url  <url>
//		ipv6_url  <url>
//		file      <path>
//		downloads on|off
//		refresh   <duration>
//		timeout   <duration>
//	}
func (c *CloudflareRanges) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, c, nil, func(opt string) error {
		var err error
		switch opt {
		case "ipv4_url":
			err = stringArg(d, &c.IPv4URL)
		case "ipv6_url":
			err = stringArg(d, &c.IPv6URL)
		case "file":
			err = stringArg(d, &c.File)
		case "downloads":
			var on bool
			on, err = onOffArg(d, opt)
			c.DisableDownloads = !on
		case "refresh":
			err = durationArg(d, opt, &c.Refresh)
		case "timeout":
			err = durationArg(d, opt, &c.Timeout)
		default:
			err = d.Errf("unrecognized cloudflare_ranges option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner       = (*CloudflareRanges)(nil)
	_ caddy.Validator         = (*CloudflareRanges)(nil)
	_ caddy.CleanerUpper      = (*CloudflareRanges)(nil)
	_ caddyhttp.IPRangeSource = (*CloudflareRanges)(nil)
	_ caddyfile.Unmarshaler   = (*CloudflareRanges)(nil)
	_ caddy.Destructor        = (*cloudflareSet)(nil)
)
