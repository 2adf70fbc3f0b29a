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
	"os"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/fetch"
)

// fetchOptions are the flags of `runtime fetch`, the mode a pool's init
// container runs to bring a model named by a URL into the cache volume.
type fetchOptions struct {
	URL              string
	CacheDir         string
	HFTokenFile      string
	HFEndpoint       string
	S3Endpoint       string
	S3Region         string
	ProgressInterval time.Duration
	ProgressAddr     string
	Attempts         int
	LogLevel         slog.Level
}

// newFetchFlagSet declares the fetch mode's flags over o.
func newFetchFlagSet(o *fetchOptions, output io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("runtime fetch", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: runtime fetch --url URL --cache-dir DIR [flags]\n\n"+
			"Downloads a model (hf://ORG/REPO[@REV]/FILE.gguf, hf://ORG/REPO[@REV]:QUANT, s3://BUCKET/KEY or https://...) "+
			"into DIR, verified and resumable, and prints the path to load. Every flag can also be set with %s<FLAG_NAME>; "+
			"the Hub token also with HF_TOKEN, S3 credentials with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.\n\n", EnvPrefix)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.URL, "url", "", "model URL: hf://ORG/REPO[@REVISION]/PATH.gguf, hf://ORG/REPO[@REVISION]:QUANT (the one GGUF file or split set naming the quantisation), s3://BUCKET/KEY or https://HOST/PATH")
	fs.StringVar(&o.CacheDir, "cache-dir", "", "cache directory (shared by a pool's pods when it is on a ReadWriteMany volume): blobs/sha256-<hex>, refs/<url-key>/model.gguf")
	fs.StringVar(&o.HFTokenFile, "hf-token-file", "", "file holding a Hugging Face token for gated or private repositories (default: $HF_TOKEN)")
	fs.StringVar(&o.HFEndpoint, "hf-endpoint", "", "base URL of the Hugging Face Hub or a mirror (default: $HF_ENDPOINT, else https://huggingface.co)")
	fs.StringVar(&o.S3Endpoint, "s3-endpoint", "", "s3:// sources: endpoint of an S3-compatible store, e.g. http://minio.minio:9000 (default: $AWS_ENDPOINT_URL_S3, else AWS's https://s3.REGION.amazonaws.com)")
	fs.StringVar(&o.S3Region, "s3-region", "", "s3:// sources: region requests are signed for (default: $AWS_REGION, else us-east-1)")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", 10*time.Second, "time between progress lines in the log")
	fs.StringVar(&o.ProgressAddr, "progress-addr", "", "address to serve the download's progress on while fetching (GET "+wire.FetchProgressPath+", JSON), e.g. :8081; a pool's pods serve it on the control port for the controller to show in the pool's ModelReady condition (empty: not served)")
	fs.IntVar(&o.Attempts, "attempts", 8, "requests per file when a transfer breaks off, each resuming where the last stopped")
	fs.TextVar(&o.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	return fs
}

// parseFetchOptions reads the fetch mode's flags, then KVPILOT_<FLAG>
// variables for flags not given.
func parseFetchOptions(args []string, getenv func(string) string, output io.Writer) (*fetchOptions, error) {
	o := &fetchOptions{}
	fs := newFetchFlagSet(o, output)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("fetch: unexpected arguments %q (flags only)", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(EnvName(f.Name)); !set[f.Name] && v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.URL == "" || o.CacheDir == "" {
		return nil, errors.New("fetch: --url and --cache-dir are required")
	}
	if _, err := fetch.ParseSource(o.URL); err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if o.Attempts < 1 {
		return nil, fmt.Errorf("--attempts %d: want at least 1", o.Attempts)
	}
	return o, nil
}

// runFetch is `runtime fetch`: it prints the loadable path on stdout and
// returns the exit code (0 done, 1 failed, 2 bad flags).
func runFetch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFetchOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "runtime:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.LogLevel}))
	opts := fetch.Options{
		CacheDir: o.CacheDir, HFEndpoint: firstNonEmpty(o.HFEndpoint, getenv("HF_ENDPOINT")), HFToken: getenv("HF_TOKEN"),
		S3: fetch.S3Config{
			Endpoint: firstNonEmpty(o.S3Endpoint, getenv("AWS_ENDPOINT_URL_S3"), getenv("AWS_ENDPOINT_URL")),
			Region:   firstNonEmpty(o.S3Region, getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
			S3Credentials: fetch.S3Credentials{
				AccessKeyID: getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: getenv("AWS_SESSION_TOKEN"),
			},
		},
		Log: log, ProgressInterval: o.ProgressInterval, Attempts: o.Attempts, Tracker: new(fetch.Tracker),
	}
	if o.HFTokenFile != "" {
		b, err := os.ReadFile(o.HFTokenFile)
		if err != nil {
			log.Error("fetch failed", "err", fmt.Errorf("--hf-token-file: %w", err))
			return 1
		}
		if opts.HFToken = strings.TrimSpace(string(b)); opts.HFToken == "" {
			log.Error("fetch failed", "err", fmt.Errorf("--hf-token-file %s is empty", o.HFTokenFile))
			return 1
		}
	}
	if o.ProgressAddr != "" {
		stop := serveFetchProgress(o.ProgressAddr, opts.Tracker, log)
		defer stop()
	}
	log.Info("fetching model", "url", o.URL, "cache_dir", o.CacheDir)
	r, err := fetch.Fetch(ctx, o.URL, opts)
	if err != nil {
		log.Error("fetch failed", "url", o.URL, "err", err)
		return 1
	}
	fmt.Fprintln(stdout, r.Path)
	return 0
}

// serveFetchProgress serves t on addr until the returned stop. The
// progress is a convenience: an address that cannot be bound is logged and
// the fetch goes on.
func serveFetchProgress(addr string, t *fetch.Tracker, log *slog.Logger) (stop func()) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("not serving the download's progress", "addr", addr, "err", err)
		return func() {}
	}
	mux := http.NewServeMux()
	mux.Handle(wire.FetchProgressPath, t)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go srv.Serve(ln)
	log.Info("serving the download's progress", "addr", ln.Addr().String(), "path", wire.FetchProgressPath)
	return func() { srv.Close() }
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
