// Command testapp is the application of the kind end-to-end test: a consumer of a placed bundle.
// It reads its value from the environment variable VALUE (which its Deployment takes from the
// bundle's ConfigMap, as an application reads its configuration at start) and serves /readyz on
// :8080: ready, unless the value starts with "bad". A bad value keeps it running but never
// ready, as an application that cannot use its configuration. It stops on SIGTERM.
//
// The test builds it into an image without Docker (go run ./hack/image --package
// ./test/kind/testapp) and loads it into the member clusters.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	value := os.Getenv("VALUE")
	ready := !strings.HasPrefix(value, "bad")
	log.Printf("testapp: value %q, ready %t", value, ready)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, fmt.Sprintf("cannot use value %q", value), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("testapp: %v", err)
	}
}
