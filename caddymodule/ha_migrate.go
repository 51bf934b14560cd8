package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// migrateOptions are caddy ha migrate's flags.
type migrateOptions struct {
	report       bool   // print what became of each line, not the Caddyfile
	reportFormat string // the report's: text or json
	splitTCP     string // where to write the mode tcp proxies for HAProxy; "" not to split
}

// runMigrate is caddy ha migrate of the HAProxy configuration in file:
// the Caddyfile on stdout, the approximations on stderr; or with
// o.report, what became of each line, printed also when lines are
// refused (the error then counts them). With o.splitTCP, the mode tcp
// proxies go to that file for HAProxy and the rest is translated.
func runMigrate(stdout, stderr io.Writer, file string, o migrateOptions) error {
	if o.reportFormat != "text" && o.reportFormat != "json" {
		return fmt.Errorf("--report-format %q: text or json", o.reportFormat)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cfg, err := parseHAProxy(body, file)
	if err != nil {
		return err
	}
	var split *haproxy.Split
	if o.splitTCP != "" {
		if split, err = splitTCP(cfg, file, o.splitTCP, stderr); err != nil {
			return err
		}
	}
	if split != nil {
		cfg = split.HTTP
	}
	tr, err := haproxy.Translate(cfg)
	if err == nil && split != nil {
		if err := writeResidual(*split, file, o.splitTCP); err != nil {
			return err
		}
	}
	if o.report {
		return printReport(stdout, file, tr, split, o, err)
	}
	if err != nil {
		return err
	}
	// The approximations, each with its line, on stderr: the Caddyfile's
	// comments say them too.
	for _, w := range tr.Warnings {
		fmt.Fprintf(stderr, "warning: %s: %s\n", w.Pos, w.Msg)
	}
	if split != nil {
		fmt.Fprintf(stdout, "# The mode tcp proxies of %s are not here: HAProxy keeps serving them\n# from %s (caddy ha migrate --split-tcp): %s.\n", file, o.splitTCP, strings.Join(split.TCPProxies, ", "))
	}
	_, err = io.WriteString(stdout, tr.Caddyfile)
	return err
}

// printReport prints what became of each line of file (tr: the
// translation of it, or of split's HTTP part), then, if it was refused
// (refusal), fails saying how many lines.
func printReport(stdout io.Writer, file string, tr haproxy.Translation, split *haproxy.Split, o migrateOptions, refusal error) error {
	lines := tr.Lines
	if split != nil {
		lines = split.Report(tr, o.splitTCP)
	}
	if err := writeReport(stdout, lines, o.reportFormat); err != nil {
		return err
	}
	if refusal != nil {
		return fmt.Errorf("%s does not translate: %s", file, refusedCount(lines))
	}
	return nil
}

// splitTCP splits cfg into the proxies Caddy takes and those HAProxy
// keeps: nil (said on stderr) if it has no mode tcp proxy; an error if
// it has only those.
func splitTCP(cfg *haproxy.Config, file, residual string, stderr io.Writer) (*haproxy.Split, error) {
	sp := cfg.SplitTCP()
	switch {
	case len(sp.TCPProxies) == 0:
		fmt.Fprintf(stderr, "note: %s has no mode tcp proxy: nothing to write to %s\n", file, residual)
		return nil, nil
	case len(sp.HTTPProxies) == 0:
		return nil, fmt.Errorf("every proxy of %s is mode tcp (%s): there is nothing for Caddy to take; keep HAProxy for it", file, strings.Join(sp.TCPProxies, ", "))
	}
	return &sp, nil
}

// writeResidual writes the TCP part of sp, split from file, to residual
// (not over file itself).
func writeResidual(sp haproxy.Split, file, residual string) error {
	if in, err := os.Stat(file); err == nil {
		if out, err := os.Stat(residual); err == nil && os.SameFile(in, out) {
			return fmt.Errorf("--split-tcp %s is %s itself: name another file for the residual", residual, file)
		}
	}
	header := fmt.Sprintf(`# Written by caddy ha migrate --split-tcp from %s: its mode tcp proxies
# (%s), for HAProxy to keep serving while Caddy serves
# the HTTP ones from the Caddyfile caddy ha migrate printed. Each line is as
# written there, its position in a comment; the global section and the
# defaults sections that both sides take are in both.
`, file, strings.Join(sp.TCPProxies, ", "))
	return os.WriteFile(residual, []byte(sp.TCP.HAProxyText(header)), 0o600)
}

// writeReport writes what became of each line: a row each as text
// (position, status, the line as written, why, and for a refused line
// what to do instead) with a count at the end, or as JSON.
func writeReport(w io.Writer, lines []haproxy.LineOutcome, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	posWidth, statusWidth := 0, 0
	for _, l := range lines {
		posWidth, statusWidth = max(posWidth, len(l.Pos.String())), max(statusWidth, len(shownStatus(l)))
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-*s  %-*s  %s", posWidth, l.Pos, statusWidth, shownStatus(l), l.Source)
		if l.Why != "" {
			b.WriteString("  — " + l.Why)
		}
		if l.Instead != "" {
			b.WriteString("; instead: " + l.Instead)
		}
		b.WriteByte('\n')
	}
	b.WriteString(summary(lines) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// shownStatus is a row's status, "would be …" for one foreseen (no
// Caddyfile was written: lines were refused).
func shownStatus(l haproxy.LineOutcome) string {
	if l.Foreseen {
		return "would be " + l.Status
	}
	return l.Status
}

// summary counts the rows of each status, in the order first seen.
func summary(lines []haproxy.LineOutcome) string {
	var order []string
	count := map[string]int{}
	for _, l := range lines {
		if count[shownStatus(l)] == 0 {
			order = append(order, shownStatus(l))
		}
		count[shownStatus(l)]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = strconv.Itoa(count[s]) + " " + s
	}
	return strconv.Itoa(len(lines)) + " lines: " + strings.Join(parts, ", ")
}

// refusedCount says how many lines were refused, and not read.
func refusedCount(lines []haproxy.LineOutcome) string {
	refused, notRead := 0, 0
	for _, l := range lines {
		switch l.Status {
		case "refused":
			refused++
		case haproxy.NotRead:
			notRead++
		}
	}
	return fmt.Sprintf("%d lines refused, %d not read", refused, notRead)
}
