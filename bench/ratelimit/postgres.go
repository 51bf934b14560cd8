package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/internal/pgtest"
)

// haPostgres is the ha global option's block for the PostgreSQL store at
// url, with the bench's key prefix (the Redis contender's).
func haPostgres(url string) string {
	return fmt.Sprintf("\tha {\n\t\tstore postgres {\n\t\t\tconnection_string %s\n\t\t\tprefix bench:\n\t\t}\n\t}\n", url)
}

// preparePostgres starts, for the contender named name among selected
// unless it is skipped already, a throwaway PostgreSQL (internal/pgtest),
// stopped at exit like every process the bench starts, and gives the
// contender a postgresProbe. It skips the contender if PostgreSQL does not
// start. It returns the connection string ("" if PostgreSQL does not run)
// and the header's notes.
func preparePostgres(name string, selected []*wrkbench.Contender) (url string, headerNotes []string) {
	for _, c := range selected {
		if c.Skipped != "" || c.Name != name {
			continue
		}
		p, err := pgtest.StartProcess()
		if err != nil {
			c.Skipped = "PostgreSQL: " + wrkbench.LastLines(err.Error(), 2)
			continue
		}
		wrkbench.AddCleanup(p.Stop)
		probe, version, err := newPostgresProbe(c, p)
		if err != nil {
			c.Skipped = err.Error()
			continue
		}
		c.Probe = probe
		url = p.URL()
		note := fmt.Sprintf("PostgreSQL %s on 127.0.0.1:%d", version, p.Port)
		if !probe.statementStats {
			note += " (no pg_stat_statements: statements not counted)"
		}
		if probe.ssMissing != "" {
			note += " (round trips not counted: " + probe.ssMissing + ")"
		}
		headerNotes = append(headerNotes, note)
	}
	return url, headerNotes
}

// postgresProbe reads, around each run of the contender on the PostgreSQL
// store, the store's statements (pg_stat_statements' calls) and round trips
// (the TCP data segments PostgreSQL received on the store's connections),
// per request, for each run and for all rounds. The probe's own connection
// and statements are left out.
type postgresProbe struct {
	contender *wrkbench.Contender
	conn      *pgx.Conn
	server    *pgtest.Process
	port      int // PostgreSQL's
	ownPort   int // the client port of the probe's own connection
	// statementStats: pg_stat_statements is there; else statements are
	// not counted.
	statementStats bool
	// ssMissing says why round trips are not counted, "" if they are.
	ssMissing string

	// Over the successful runs:
	requests   int64
	calls      map[string]int64 // by statement
	segments   int64
	statements int64         // the sum of calls
	cpu        time.Duration // PostgreSQL's processor time, its every process
}

func newPostgresProbe(c *wrkbench.Contender, p *pgtest.Process) (*postgresProbe, string, error) {
	ctx, cancel := context.WithTimeout(wrkbench.Interrupted(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return nil, "", fmt.Errorf("PostgreSQL: %v", err)
	}
	wrkbench.AddCleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx)
	})
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, "", fmt.Errorf("PostgreSQL: SHOW server_version: %v", err)
	}
	if f := strings.Fields(version); len(f) > 0 {
		version = f[0] // "15.14 (Debian 15.14-0+deb12u1)" → "15.14"
	}
	probe := &postgresProbe{contender: c, conn: conn, server: p, port: p.Port, statementStats: p.StatementStats, calls: map[string]int64{}}
	if addr, ok := conn.PgConn().Conn().LocalAddr().(*net.TCPAddr); ok {
		probe.ownPort = addr.Port
	}
	if _, err := exec.LookPath("ss"); err != nil {
		probe.ssMissing = "ss not found (apt-get install iproute2)"
	} else if _, err := receivedSegments(p.Port); err != nil {
		probe.ssMissing = err.Error()
	}
	return probe, version, nil
}

func (p *postgresProbe) Measure(wrk func() (wrkbench.Run, error)) (wrkbench.Run, []string, error) {
	callsBefore, segsBefore, err := p.counters()
	if err != nil {
		return wrkbench.Run{}, nil, err
	}
	cpuBefore, err := p.server.CPUTime()
	if err != nil {
		return wrkbench.Run{}, nil, err
	}
	r, err := wrk()
	if err != nil {
		return wrkbench.Run{}, nil, err
	}
	cpuAfter, err := p.server.CPUTime()
	if err != nil {
		return wrkbench.Run{}, nil, err
	}
	callsAfter, segsAfter, err := p.counters()
	if err != nil {
		return wrkbench.Run{}, nil, err
	}
	cpu := cpuAfter - cpuBefore
	calls := wrkbench.CallsDelta(callsBefore, callsAfter)
	var segments int64
	for peer, n := range segsAfter {
		if peer != p.ownPort {
			// A connection opened during the run started from 0.
			segments += max(0, n-segsBefore[peer])
		}
	}
	var notes []string
	if f := p.figures(wrkbench.Sum(calls), segments, cpu, r.Requests); r.Requests > 0 && f != "" {
		notes = append(notes, f)
	}
	p.cpu += cpu
	p.requests += r.Requests
	p.segments += segments
	p.statements += wrkbench.Sum(calls)
	for q, n := range calls {
		p.calls[q] += n
	}
	return r, notes, nil
}

// counters returns the calls of each of the store's statements so far (nil
// without pg_stat_statements) and PostgreSQL's data segments on each
// connection, by the client's port (nil without ss).
func (p *postgresProbe) counters() (map[string]int64, map[int]int64, error) {
	var calls map[string]int64
	if p.statementStats {
		var err error
		if calls, err = p.statementCalls(); err != nil {
			return nil, nil, fmt.Errorf("pg_stat_statements: %v", err)
		}
	}
	var segs map[int]int64
	if p.ssMissing == "" {
		var err error
		if segs, err = receivedSegments(p.port); err != nil {
			return nil, nil, err
		}
	}
	return calls, segs, nil
}

// statementCalls returns pg_stat_statements' calls of each statement
// (normalized text) run in the postgres database, without the probe's own
// (those that read pg_stat_statements).
func (p *postgresProbe) statementCalls() (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(wrkbench.Interrupted(), 2*time.Second)
	defer cancel()
	rows, err := p.conn.Query(ctx, "SELECT query, sum(calls)::bigint FROM pg_stat_statements"+
		" WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY query")
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	var query string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&query, &n}, func() error {
		if !strings.Contains(query, "pg_stat_statements") {
			calls[query] = n
		}
		return nil
	})
	return calls, err
}

// receivedSegments returns, for each established TCP connection to port on
// 127.0.0.1, by the client's port, the data segments (those with a
// payload) the server side has received: tcp_info's tcpi_data_segs_in, as
// ss -i reads it.
func receivedSegments(port int) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(wrkbench.Interrupted(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ss", "-tinH", "state", "established", fmt.Sprintf("( sport = :%d )", port)).Output()
	if err != nil {
		return nil, fmt.Errorf("ss: %v", err)
	}
	return parseSS(string(out))
}

// parseSS reads ss -tinH's output: a line per socket (its last field the
// peer's address) then, indented, its tcp_info.
func parseSS(out string) (map[int]int64, error) {
	segs := map[int]int64{}
	peer := -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			f := strings.Fields(line)
			_, port, err := net.SplitHostPort(f[len(f)-1])
			if peer, err = strconv.Atoi(port); err != nil {
				return nil, fmt.Errorf("ss: no peer address in %q", line)
			}
			continue
		}
		if peer < 0 {
			return nil, fmt.Errorf("ss: tcp_info before a socket: %q", line)
		}
		segs[peer] = 0 // ss leaves the field out while it is 0
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "data_segs_in:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("ss: %q: %v", f, err)
				}
				segs[peer] = n
			}
		}
		peer = -1
	}
	if len(segs) == 0 {
		return nil, errors.New("ss shows no connection to PostgreSQL (not even the bench's own)")
	}
	return segs, sc.Err()
}

// figures gives statements, round trips and PostgreSQL's processor time
// per request: "1.00 statements/req, 0.25 round trips/req (4.0 statements
// each), PostgreSQL CPU 30 µs/req", leaving out what is not counted.
func (p *postgresProbe) figures(statements, segments int64, cpu time.Duration, requests int64) string {
	perReq := func(n int64) float64 { return float64(n) / float64(requests) }
	var parts []string
	if p.statementStats {
		parts = append(parts, fmt.Sprintf("%.2f statements/req", perReq(statements)))
	}
	if p.ssMissing == "" {
		s := fmt.Sprintf("%.2f round trips/req", perReq(segments))
		if p.statementStats && segments > 0 {
			s += fmt.Sprintf(" (%.1f statements each)", float64(statements)/float64(segments))
		}
		parts = append(parts, s)
	}
	parts = append(parts, fmt.Sprintf("PostgreSQL CPU %.0f µs/req", perReq(cpu.Microseconds())))
	return strings.Join(parts, ", ")
}

func (p *postgresProbe) Problems() (column, warning string) { return "", "" }

// PrintReport gives the figures of all rounds, each statement's calls per
// request, and how to read them.
func (p *postgresProbe) PrintReport() {
	if p.requests == 0 {
		return
	}
	fmt.Printf("\n%s, all rounds: %d requests", p.contender.Name, p.requests)
	if f := p.figures(p.statements, p.segments, p.cpu, p.requests); f != "" {
		fmt.Print(", " + f)
	}
	fmt.Println()
	if p.statementStats {
		queries := make([]string, 0, len(p.calls))
		for q := range p.calls {
			queries = append(queries, q)
		}
		sort.Slice(queries, func(i, j int) bool {
			if p.calls[queries[i]] != p.calls[queries[j]] {
				return p.calls[queries[i]] > p.calls[queries[j]]
			}
			return queries[i] < queries[j]
		})
		fmt.Println("  per request:")
		for _, q := range queries {
			if perReq := float64(p.calls[q]) / float64(p.requests); perReq >= 0.001 {
				fmt.Printf("    %.3f  %s\n", perReq, shortStatement(q))
			} else {
				fmt.Printf("    (%s in all)  %s\n", plural(p.calls[q], "call"), shortStatement(q))
			}
		}
		fmt.Println("  (statements: pg_stat_statements' calls deltas over each run, the probe's own left out)")
	} else {
		fmt.Println("  (statements not counted: pg_stat_statements is not available)")
	}
	fmt.Println("  (PostgreSQL CPU: the user and system time of the server's processes, from /proc, over each run)")
	if p.ssMissing == "" {
		fmt.Println("  (round trips: TCP data segments PostgreSQL received on the store's connections, tcp_info")
		fmt.Println("  data_segs_in by ss -i: one per write of the store, which sends a batch of pipelined")
		fmt.Println("  statements in one write and waits for their answers; the probe's connection left out)")
	} else {
		fmt.Println("  (round trips not counted: " + p.ssMissing + ")")
	}
}

// shortStatement is q on one line, cut to 100 characters.
func shortStatement(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if r := []rune(q); len(r) > 100 {
		q = string(r[:99]) + "…"
	}
	return q
}

// plural is "1 call", "2 calls".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
