package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgcipher/pgcipher/proxy/audit"
	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/metrics"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

func main() {
	// from the start: a SIGTERM while the CMK command runs is kept
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	if err := run(os.Args[1:], sigs, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, usage)
			return
		}
		fmt.Fprintf(os.Stderr, "pgcipher-proxy: %v\n", err)
		os.Exit(1)
	}
}

// run is the command: it checks the settings, then serves until a
// SIGTERM or SIGINT on sigs has shut it down.
func run(args []string, sigs <-chan os.Signal, stdout, stderr io.Writer) error {
	st, err := parse(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ld, err := load(ctx, st, true)
	if err != nil {
		return err
	}
	if st.checkConfig {
		from := ""
		if st.config != "" {
			from = " (" + st.config + ")"
		}
		fmt.Fprintf(stdout, "pgcipher-proxy: configuration OK%s\n", from)
		return nil
	}
	p := &proxy{args: args, st: st, level: new(slog.LevelVar), shutdownTimeout: ld.shutdownTimeout}
	p.level.Set(ld.level)
	opts := &slog.HandlerOptions{Level: p.level}
	if ld.json {
		p.log = slog.New(slog.NewJSONHandler(stderr, opts))
	} else {
		p.log = slog.New(slog.NewTextHandler(stderr, opts))
	}
	return p.serve(ctx, ld, sigs)
}

// proxy is the running service.
type proxy struct {
	args            []string
	st              *settings // as running: a SIGHUP updates the live ones
	level           *slog.LevelVar
	log             *slog.Logger
	shutdownTimeout time.Duration
	srv             *wire.Server
	keys            *catalog.Keys
	metrics         *metrics.Metrics
}

func (p *proxy) serve(ctx context.Context, ld *loaded, sigs <-chan os.Signal) error {
	st := p.st
	if st.metrics != "" {
		p.metrics = metrics.New()
		ml, err := net.Listen("tcp", st.metrics)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", p.metrics.Handler())
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ml)
		defer hs.Close() // last: the shutdown is watched to its end
		p.log.Info("serving metrics", "address", ml.Addr().String(), "path", "/metrics")
	}
	if st.pprof != "" {
		go func() { p.log.Error("pprof", "err", http.ListenAndServe(st.pprof, nil)) }()
	}
	p.keys = catalog.NewKeys(ld.cmk, st.cmkName)
	p.keys.SetUngranted(ld.ungranted)
	if err := p.keys.LoadTenantKeyring(st.tenantKeyring, ld.tenantKeyCache); err != nil {
		return fmt.Errorf("--tenant-keyring: %w", err)
	}
	cfg := wire.Config{Upstream: st.upstream, Catalog: st.catalog, Keys: p.keys,
		Log: p.log, Metrics: p.metrics, ClientTLS: ld.clientTLS, UpstreamCerts: st.upstreamCerts,
		Pool: ld.pool, AuthUsers: ld.authUsers}
	if st.auditLog != "" {
		key, err := audit.Key(ld.cmk, st.cmkName)
		if err != nil {
			return err
		}
		al, err := audit.Open(st.auditLog, ld.auditMaxSize, key)
		if err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		cfg.Audit, cfg.AuditRequired = al, ld.auditRequired
		p.log.Info("audit log open", "file", st.auditLog, "required", ld.auditRequired, "head", al.Head().String())
		defer func() {
			// the head, kept here as well, shows records removed from the
			// log's end (pgcipher-keys verify-audit --head)
			p.log.Info("audit log closed", "head", al.Head().String())
			al.Close()
		}()
	}
	if st.record != "" {
		f, err := os.OpenFile(st.record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("--record: %w", err)
		}
		defer f.Close()
		cfg.Record = f
	}
	srv, err := wire.NewServer(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	p.srv = srv
	l, err := net.Listen("tcp", st.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	p.log.Info("listening", "address", l.Addr().String(), "upstream", redact(st.upstream), "pool_mode", ld.pool.Mode)

	var shutdown chan error // set once the first SIGTERM or SIGINT came
	// force ends the shutdown's wait: at its timeout, or a second signal
	sctx, force := context.WithCancel(ctx)
	defer force()
	for {
		select {
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGHUP:
				p.reload(ctx)
			case shutdown == nil:
				p.log.Info("shutting down: no new connections; each session closes at its next idle point, outside a transaction",
					"signal", sig.String(), "timeout", p.shutdownTimeout.String())
				time.AfterFunc(p.shutdownTimeout, force)
				shutdown = make(chan error, 1)
				go func() { shutdown <- srv.Shutdown(sctx) }()
			default:
				p.log.Warn("second signal: closing every session now", "signal", sig.String())
				force()
			}
		case err := <-shutdown:
			if err != nil {
				p.log.Warn("shut down", "err", err)
			} else {
				p.log.Info("shut down: every session ended")
			}
			return nil
		case err := <-served:
			if shutdown != nil {
				served = nil // the shutdown closed the listener
				continue
			}
			if err == nil {
				err = errors.New("the listener closed")
			}
			return fmt.Errorf("--listen: %w", err)
		}
	}
}

// reload reads the config file again (SIGHUP): the live settings change
// now, the others are reported as waiting for a restart; a config that
// does not load leaves the running one as it is.  Every connection
// reloads the encrypted-column catalog in any case.
func (p *proxy) reload(ctx context.Context) {
	p.log.Info("SIGHUP: reloading the configuration and the encrypted-column catalog")
	p.srv.Reload()
	st, err := parse(p.args)
	var ld *loaded
	if err == nil {
		ld, err = load(ctx, st, false)
	}
	if err != nil {
		p.metrics.Reload(false)
		p.log.Error("SIGHUP: configuration not reloaded, the running one stays", "err", err)
		return
	}
	changed, restart := []string{}, []string{}
	for _, x := range table {
		now, next := x.field(p.st), x.field(st)
		if *now == *next {
			continue
		}
		if !x.live {
			restart = append(restart, x.name)
			continue
		}
		changed = append(changed, x.name)
		*now = *next
	}
	p.level.Set(ld.level)
	p.srv.SetTLS(ld.clientTLS, st.upstreamCerts) // certificates read again, changed or not
	p.shutdownTimeout = ld.shutdownTimeout
	p.srv.SetPool(ld.pool) // the mode stays
	p.srv.SetAuthFile(ld.authUsers)
	p.keys.SetUngranted(ld.ungranted)
	// read again whether or not it changed: a shredding rewrites the file
	if err := p.keys.LoadTenantKeyring(st.tenantKeyring, ld.tenantKeyCache); err != nil {
		p.log.Error("SIGHUP: the tenant keyring did not load; tenant-keyed columns are refused until it does", "err", err)
		p.keys.SetTenantKeyring(nil, ld.tenantKeyCache)
	}
	p.metrics.Reload(true)
	p.log.Info("SIGHUP: configuration reloaded", "changed", changed)
	if len(restart) > 0 {
		p.log.Warn("SIGHUP: these settings change only at a restart; the running values stay", "settings", restart)
	}
}
