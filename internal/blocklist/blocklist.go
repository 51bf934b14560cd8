// Package blocklist writes the HAProxy configuration of a block list, as
// generated from threat feeds: one ACL of many lines of addresses, for
// measuring the HAProxy adapter on large inputs.
package blocklist

import (
	"fmt"
	"strings"
)

// Config is an HAProxy configuration whose frontend denies the addresses
// of one ACL of lines lines, perLine addresses each (HAProxy reads at most
// 64 words a line), every address another.
func Config(lines, perLine int) string {
	var b strings.Builder
	b.WriteString("defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n")
	b.WriteString("frontend web\n    bind 127.0.0.1:8080\n")
	n := 0
	for range lines {
		b.WriteString("    acl blocked src")
		for range perLine {
			fmt.Fprintf(&b, " 10.%d.%d.%d", n>>16&255, n>>8&255, n&255)
			n++
		}
		b.WriteByte('\n')
	}
	b.WriteString("    http-request deny if blocked\n    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n")
	return b.String()
}
