package wrkbench

import (
	"errors"
	"slices"
	"testing"
)

func TestRedisProbeFigures(t *testing.T) {
	calls := map[string]int64{"multi": 100, "incrby": 100, "pexpire": 100, "exec": 100}
	p := &RedisProbe{}
	if got, want := p.figures(calls, 23, 100, false, "transactions"), "4.00 Redis commands/req, 0.23 round trips/req"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	p.Transactions = true
	if got, want := p.figures(calls, 23, 100, false, "transactions (EXEC)"), "4.00 Redis commands/req, 1.00 transactions (EXEC)/req, 0.23 round trips/req"; got != want {
		t.Errorf("transactions: %q, want %q", got, want)
	}
	p = &RedisProbe{RedisReport: RedisReport{Breakdown: true}}
	if got, want := p.figures(map[string]int64{"getex": 100, "ping": 1}, 100, 1000, true, "transactions"), "0.10 Redis commands/req (getex 0.100  ping 0.001), 0.10 round trips/req"; got != want {
		t.Errorf("breakdown: %q, want %q", got, want)
	}
}

// fakeProbe records when it measures and notes its name.
type fakeProbe struct {
	name    string
	trace   *[]string
	fail    bool
	problem string
}

func (f *fakeProbe) Measure(wrk func() (Run, error)) (Run, []string, error) {
	*f.trace = append(*f.trace, f.name+" before")
	r, err := wrk()
	*f.trace = append(*f.trace, f.name+" after")
	if err == nil && f.fail {
		err = errors.New(f.name + " failed")
	}
	return r, []string{f.name}, err
}

func (f *fakeProbe) Problems() (string, string) { return f.problem, f.name + " warning" }
func (f *fakeProbe) PrintReport()               {}

func TestProbes(t *testing.T) {
	var trace []string
	wrk := func() (Run, error) { trace = append(trace, "wrk"); return Run{Requests: 7}, nil }
	ps := Probes{&fakeProbe{name: "a", trace: &trace}, &fakeProbe{name: "b", trace: &trace, problem: "!! b"}}
	r, notes, err := ps.Measure(wrk)
	if err != nil || r.Requests != 7 || !slices.Equal(notes, []string{"a", "b"}) ||
		!slices.Equal(trace, []string{"b before", "a before", "wrk", "a after", "b after"}) {
		t.Errorf("%v, %+v, notes %q, trace %q", err, r, notes, trace)
	}
	if column, warning := ps.Problems(); column != "!! b" || warning != "b warning" {
		t.Errorf("problems %q, %q", column, warning)
	}
	trace = nil
	ps[0].(*fakeProbe).fail = true
	if _, notes, err := ps.Measure(wrk); err == nil || notes != nil {
		t.Errorf("a failing probe: %v, notes %q", err, notes)
	}
}
