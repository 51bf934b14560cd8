package recovered

import (
	"strings"
	"testing"
)

func TestLoopReportsAndGoesOn(t *testing.T) {
	var reported []string
	report := func(v any, stack []byte) {
		if !strings.Contains(string(stack), "recovered_test.go") {
			t.Errorf("the stack does not show where it panicked:\n%s", stack)
		}
		reported = append(reported, v.(string))
	}
	stop := make(chan struct{})
	runs := 0
	Loop(report, 0, stop, func() {
		runs++
		if runs < 3 {
			panic("boom")
		}
		close(stop) // the loop's normal end
	})
	if runs != 3 || len(reported) != 2 || reported[0] != "boom" {
		t.Fatalf("%d runs, reported %v", runs, reported)
	}
	if Call(nil, func() { panic("quiet") }) {
		t.Fatal("a panic reported as returning")
	}
	if !Call(nil, func() {}) {
		t.Fatal("a return reported as a panic")
	}
}
