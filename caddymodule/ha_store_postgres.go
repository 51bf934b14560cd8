package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/store"
)

func init() {
	caddy.RegisterModule(PostgresStore{})
}

// PostgresStore keeps the ha store in a PostgreSQL table, the database the
// cluster already runs, shared by every Caddy instance (and the cluster's
// app, with the toolkit's table): the toolkit guide's table and one
// statement per operation, expiring by the database's clock (now()), with
// calls that arrive together sharing a round trip. Expired rows are
// deleted every few minutes. The table and its index are created if
// missing; a table of that name with another shape is refused at load.
type PostgresStore struct {
	// The connection string, as pgx reads it (a URL or key=value pairs),
	// e.g. postgres://caddy@db.internal/nodepilot?sslmode=verify-full.
	// Placeholders such as {env.PG_URL} are replaced. TLS is pgx's:
	// sslmode, sslrootcert, sslcert and sslkey in the string.
	ConnectionString string `json:"connection_string,omitempty"`
	// The table, an SQL identifier, optionally schema-qualified.
	// Default: short_lived_store.
	Table string `json:"table,omitempty"`
	// Put before every key, to keep this proxy's keys apart from the
	// app's in the same table. Default: "caddy-ha:".
	Prefix *string `json:"prefix,omitempty"`
	// Connections in the pool. Default: pgx's (4, or the CPUs if more).
	PoolSize int `json:"pool_size,omitempty"`
	// The database's statement_timeout on the store's connections.
	// Handlers bound each call further (edge_rate_limit's store_timeout).
	// Default: 1s.
	StatementTimeout caddy.Duration `json:"statement_timeout,omitempty"`
	// Timeout of connecting. Default: 1s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
}

// Defaults of the PostgreSQL store.
const (
	defaultPostgresTable            = "short_lived_store"
	defaultPostgresStatementTimeout = time.Second
	defaultPostgresDialTimeout      = time.Second
	// postgresSetupTimeout bounds checking (or creating) the table at load.
	postgresSetupTimeout = 5 * time.Second
)

// CaddyModule returns the Caddy module information.
func (PostgresStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha.stores.postgres", New: func() caddy.Module { return new(PostgresStore) }}
}

func (p *PostgresStore) setDefaults() {
	p.Table = cmp.Or(p.Table, defaultPostgresTable)
	if p.Prefix == nil {
		prefix := DefaultStorePrefix
		p.Prefix = &prefix
	}
	p.StatementTimeout = cmp.Or(p.StatementTimeout, caddy.Duration(defaultPostgresStatementTimeout))
	p.DialTimeout = cmp.Or(p.DialTimeout, caddy.Duration(defaultPostgresDialTimeout))
}

const postgresModule = "store postgres"

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (p *PostgresStore) Validate() error {
	v := *p
	v.setDefaults()
	switch {
	case v.ConnectionString == "":
		return badSetting(postgresModule, "connection_string", "is required")
	case !store.ValidTableName(v.Table):
		return badSetting(postgresModule, "table", "%q is not an SQL identifier ([A-Za-z_][A-Za-z0-9_]*, optionally schema.table)", v.Table)
	case v.PoolSize < 0:
		return badSetting(postgresModule, "pool_size", "must not be negative")
	case v.StatementTimeout < 0:
		return badSetting(postgresModule, "statement_timeout", "must not be negative")
	case v.DialTimeout < 0:
		return badSetting(postgresModule, "dial_timeout", "must not be negative")
	}
	if _, err := v.poolConfig(); err != nil {
		return badSetting(postgresModule, "connection_string", "%v", err)
	}
	return nil
}

// poolConfig is the pool's configuration: the connection string with its
// placeholders replaced, and the store's settings.
func (p *PostgresStore) poolConfig() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(caddy.NewReplacer().ReplaceAll(p.ConnectionString, ""))
	if err != nil {
		// pgx's message can quote the string, password included.
		var parse *pgconn.ParseConfigError
		if errors.As(err, &parse) {
			return nil, errors.New("cannot be parsed (see pgx's connection string syntax)")
		}
		return nil, err
	}
	if p.PoolSize > 0 {
		cfg.MaxConns = int32(p.PoolSize)
	}
	cfg.ConnConfig.ConnectTimeout = time.Duration(p.DialTimeout)
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(time.Duration(p.StatementTimeout).Milliseconds(), 10)
	// The store's connections name themselves in pg_stat_activity.
	cfg.ConnConfig.RuntimeParams["application_name"] = "caddy-ha"
	return cfg, nil
}

// OpenStore opens the pool and checks the table, creating it if missing.
// A database that does not answer yet is an outage, not a config error:
// the table is checked again when it does.
func (p *PostgresStore) OpenStore() (store.Store, error) {
	v := *p
	v.setDefaults()
	cfg, err := v.poolConfig()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	s := store.NewPostgres(pool, v.Table, *v.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), postgresSetupTimeout)
	defer cancel()
	if err := s.EnsureTable(ctx); err != nil && !store.PostgresUnreachable(err) {
		s.Close()
		return nil, fmt.Errorf("table %s: %w", v.Table, err)
	}
	return s, nil
}

// Describe names the store by what tells two stores apart: its host,
// port, database, user, table and prefix, never its password.
func (p *PostgresStore) Describe() string {
	v := *p
	v.setDefaults()
	cfg, err := v.poolConfig()
	if err != nil {
		return "postgres"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres %s/%s user=%s table=%s prefix=%s",
		net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database, c.User, v.Table, *v.Prefix)
}

// UnmarshalCaddyfile sets up the PostgreSQL store. Syntax:
//
//	store postgres {
//		connection_string <string>
//		table             <name>
//		prefix            <prefix>
//		pool_size         <n>
//		statement_timeout <duration>
//		dial_timeout      <duration>
//	}
func (p *PostgresStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, p, nil, func(opt string) error {
		switch opt {
		case "connection_string":
			return stringArg(d, &p.ConnectionString)
		case "table":
			return stringArg(d, &p.Table)
		case "prefix":
			var prefix string
			err := stringArg(d, &prefix)
			p.Prefix = &prefix
			return err
		case "pool_size":
			return countArg(d, opt, &p.PoolSize)
		case "statement_timeout":
			return durationArg(d, opt, &p.StatementTimeout)
		case "dial_timeout":
			return durationArg(d, opt, &p.DialTimeout)
		}
		return d.Errf("unrecognized postgres store option '%s'", opt)
	})
}

// Interface guards
var (
	_ StoreBackend          = (*PostgresStore)(nil)
	_ caddy.Validator       = (*PostgresStore)(nil)
	_ caddyfile.Unmarshaler = (*PostgresStore)(nil)
)
