package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/buildinfo"
)

// The OpenTelemetry variables serve reads itself; the exporter and the
// SDK read the rest of the standard OTEL_* ones (headers, timeouts,
// OTEL_BSP_*, OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES).
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSDKDisabled        = "OTEL_SDK_DISABLED"
)

// flushTimeout bounds the export of the spans still buffered at shutdown.
const flushTimeout = 5 * time.Second

// setupTracing returns the server's tracing: spans exported over OTLP
// (http/protobuf) when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED is
// not true), else nil and nothing set up. The function it returns
// flushes the spans still buffered and stops the exporter; call it once
// the server has stopped.
func setupTracing(ctx context.Context, log *slog.Logger) (*readpast.Tracing, func(), error) {
	none := func() {}
	endpoint := cmp.Or(os.Getenv(envOTLPTracesEndpoint), os.Getenv(envOTLPEndpoint))
	if endpoint == "" || strings.EqualFold(strings.TrimSpace(os.Getenv(envSDKDisabled)), "true") {
		return nil, none, nil
	}
	name, proto := envOTLPTracesProtocol, os.Getenv(envOTLPTracesProtocol)
	if proto == "" {
		name, proto = envOTLPProtocol, os.Getenv(envOTLPProtocol)
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, none, usagef("%s=%s: readpast serve exports traces over OTLP http/protobuf only: unset it or set http/protobuf, and point %s at the collector's OTLP/HTTP port (4318 by default)",
			name, proto, envOTLPEndpoint)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// service.name defaults to readpast; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read after, take precedence.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("readpast"), semconv.ServiceVersion(buildinfo.Get().Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, none, fmt.Errorf("OpenTelemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t, err := readpast.NewTracing(tp, nil)
	if err != nil {
		return nil, none, err
	}
	log.Info("tracing", slog.String("exporter", "otlp http/protobuf"), slog.String("endpoint", endpoint))
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flush traces", slog.Any("error", err))
		}
	}, nil
}
