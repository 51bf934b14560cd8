package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-ha/caddy-ha/status"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "ha",
		Usage: "status [--json] [--address <interface>] [--config <path> [--adapter <name>]] | migrate [--report [--report-format text|json]] [--split-tcp <residual.cfg>] <haproxy.cfg>",
		Short: "Shows the state of caddy-ha in a running Caddy; migrates an HAProxy configuration",
		Long: `
The ha command reads caddy-ha's operator's view from a running Caddy's admin
API (GET /ha/status).

  caddy ha status         prints leader pools, rate-limit zones, stores, upload
                          affinity, Cloudflare ranges and pinned connections
                          as tables;
  caddy ha status --json  prints the view as JSON.
  caddy ha migrate <haproxy.cfg>
                          prints the HAProxy configuration as a Caddyfile to
                          keep, each HAProxy line as a comment above what it
                          became; caddy run --adapter haproxy runs the same.
  caddy ha migrate --report <haproxy.cfg>
                          prints a row per line instead: translated,
                          approximated, ignored or refused, and why (also
                          when lines are refused; then it exits non-zero).
  caddy ha migrate --split-tcp <residual.cfg> <haproxy.cfg>
                          translates the mode http proxies and writes the
                          mode tcp ones to residual.cfg, for HAProxy.

The admin API's address comes from --address, else from the admin listener
of --config (with --adapter), else the default localhost:2019.
`,
		CobraFunc: func(cmd *cobra.Command) {
			statusCmd := &cobra.Command{
				Use:   "status [--json] [--address <interface>] [--config <path> [--adapter <name>]]",
				Short: "Prints caddy-ha's status as tables, or as JSON",
				Args:  cobra.NoArgs,
				RunE: func(c *cobra.Command, _ []string) error {
					fl := c.Flags()
					address, _ := fl.GetString("address")
					config, _ := fl.GetString("config")
					adapter, _ := fl.GetString("adapter")
					asJSON, _ := fl.GetBool("json")
					c.SilenceUsage = true
					return printHAStatus(c.OutOrStdout(), address, config, adapter, asJSON)
				},
			}
			statusCmd.Flags().Bool("json", false, "Print the raw view as JSON")
			statusCmd.Flags().String("address", "", "The admin API's address, if not the default")
			statusCmd.Flags().StringP("config", "c", "", "Config file to read the admin API's address from, if --address is not used")
			statusCmd.Flags().StringP("adapter", "a", "", "Name of the config adapter to apply (when --config is used)")
			cmd.AddCommand(statusCmd)
			migrateCmd := &cobra.Command{
				Use:   "migrate [--report [--report-format text|json]] [--split-tcp <residual.cfg>] <haproxy.cfg>",
				Short: "Prints an HAProxy configuration as a Caddyfile, each HAProxy line kept as a comment above what it became",
				Args:  cobra.ExactArgs(1),
				RunE: func(c *cobra.Command, args []string) error {
					fl := c.Flags()
					var o migrateOptions
					o.report, _ = fl.GetBool("report")
					o.reportFormat, _ = fl.GetString("report-format")
					o.splitTCP, _ = fl.GetString("split-tcp")
					c.SilenceUsage = true
					return runMigrate(c.OutOrStdout(), c.ErrOrStderr(), args[0], o)
				},
			}
			migrateCmd.Flags().Bool("report", false, "Print what became of each line (translated, approximated, ignored, refused: why, and what to do instead) instead of the Caddyfile; exits non-zero if lines are refused")
			migrateCmd.Flags().String("report-format", "text", "The report's format: text or json")
			migrateCmd.Flags().String("split-tcp", "", "Write the mode tcp proxies to this file, for HAProxy to keep serving, and translate the rest")
			cmd.AddCommand(migrateCmd)
		},
	})
}

// printHAStatus reads /ha/status from the admin API and prints it to out.
func printHAStatus(out io.Writer, address, config, adapter string, asJSON bool) error {
	addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
	if err != nil {
		return fmt.Errorf("finding the admin API's address: %v", err)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, http.MethodGet, "/ha/status", nil, nil)
	if err != nil && strings.Contains(err.Error(), "HTTP 404") {
		return fmt.Errorf("the admin API at %s has no /ha/status: is this Caddy built with caddy-ha? (caddy list-modules shows admin.api.ha)", addr)
	}
	if err != nil {
		return fmt.Errorf("cannot read caddy-ha's status from the admin API at %s (is Caddy running, with its admin API on? --address names another): %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the admin API's answer: %v", err)
	}
	if asJSON {
		_, err = out.Write(body)
		return err
	}
	var v status.View
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the admin API at %s did not answer caddy-ha's status (is this Caddy built with caddy-ha?): %v", addr, err)
	}
	return status.WriteTable(out, v)
}
