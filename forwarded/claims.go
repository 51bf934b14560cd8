package forwarded

import (
	"fmt"
	"net/http"
)

// Kind is what a header claims about a request.
type Kind string

// The kinds of claim.
const (
	KindAddress     Kind = "address"            // the client's address
	KindScheme      Kind = "scheme"             // the client's scheme (TLS or not)
	KindHost        Kind = "host"               // the host the client asked for
	KindPath        Kind = "path"               // the path before a proxy rewrote it
	KindCertificate Kind = "client certificate" // the client's TLS certificate, or its check
	KindMethod      Kind = "method"             // a method to use instead of the request's
)

// Claim is a header that a widely used framework or proxy reads as the
// client's address, scheme, host, path, certificate or method, besides the
// forwarded set itself (Forwarded, X-Forwarded-For, -Proto, -Host), which
// Proxy.Forward replaces.
type Claim struct {
	Header string // as usually written
	Kind   Kind
	ReadBy string // who reads it, for the docs
}

// FromTrusted reports whether the claim passes from a trusted peer by
// default. Address, scheme and host claims never do: the forwarded set
// sent says who the client is, and a second answer beside it is one a
// client could have chosen. Path and certificate claims do: a proxy in
// front that rewrote the path or ended TLS says so with them, and nothing
// else carries what they say. Method overrides are the client's own word:
// they pass from every peer unless stripped, and then from none (see
// NewStripper).
func (c Claim) FromTrusted() bool {
	return c.Kind == KindPath || c.Kind == KindCertificate
}

// Claims is every header the forwarded handler strips (method overrides
// only when told to).
var Claims = []Claim{
	{"X-Real-IP", KindAddress, "nginx realip, Gin, Echo, Laravel, request-ip"},
	{"CF-Connecting-IP", KindAddress, "Cloudflare (believed from its ranges only, then removed)"},
	{"CF-Connecting-IPv6", KindAddress, "Cloudflare (pseudo IPv4)"},
	{"True-Client-IP", KindAddress, "Akamai, Cloudflare Enterprise"},
	{"X-Client-IP", KindAddress, "Apache mod_remoteip setups, request-ip, F5"},
	{"Client-IP", KindAddress, "Rails (ActionDispatch::RemoteIp)"},
	{"X-Cluster-Client-IP", KindAddress, "Rackspace, Riverbed Stingray, request-ip"},
	{"X-Forwarded", KindAddress, "request-ip"},
	{"Forwarded-For", KindAddress, "request-ip"},
	{"X-Forwarded-Server", KindAddress, "Apache mod_proxy"},
	{"X-Forwarded-By", KindAddress, "Tomcat RemoteIpValve (proxiesHeader)"},
	{"X-Original-Forwarded-For", KindAddress, "ingress-nginx"},
	{"X-Original-For", KindAddress, "ASP.NET Core ForwardedHeaders"},
	{"Fastly-Client-IP", KindAddress, "Fastly"},
	{"Proxy-Client-IP", KindAddress, "WebLogic plugin, Java getClientIp helpers"},
	{"WL-Proxy-Client-IP", KindAddress, "WebLogic"},
	{"X-ProxyUser-Ip", KindAddress, "Google Cloud, Java getClientIp helpers"},
	{"X-Originating-IP", KindAddress, "Microsoft Exchange, IIS"},
	{"X-Remote-IP", KindAddress, "PHP and Laravel helpers"},
	{"X-Remote-Addr", KindAddress, "PHP and Laravel helpers"},
	{"X-Envoy-External-Address", KindAddress, "Envoy, Istio"},
	{"X-Envoy-Internal", KindAddress, "Envoy (marks a request internal)"},
	{"X-Azure-ClientIP", KindAddress, "Azure Front Door"},
	{"X-Azure-SocketIP", KindAddress, "Azure Front Door"},
	{"Fly-Client-IP", KindAddress, "Fly.io"},
	{"X-AppEngine-User-IP", KindAddress, "Google App Engine"},
	{"X-Forwarded-Port", KindHost, "Spring, Express, Rack, ASP.NET Core (the port of URLs it builds)"},
	{"X-Host", KindHost, "Symfony and PHP helpers, Rack"},
	{"X-Original-Host", KindHost, "ASP.NET Core ForwardedHeaders, IIS ARR"},
	{"X-Forwarded-Ssl", KindScheme, "Rails (Rack), Spring"},
	{"X-Forwarded-Scheme", KindScheme, "Rack, nginx setups"},
	{"X-Forwarded-Protocol", KindScheme, "Rack, Symfony"},
	{"X-Url-Scheme", KindScheme, "Rack, Django setups"},
	{"Front-End-Https", KindScheme, "Microsoft OWA, IIS, Rack"},
	{"X-Scheme", KindScheme, "ingress-nginx, Tornado"},
	{"X-Original-Proto", KindScheme, "ASP.NET Core ForwardedHeaders"},
	{"CF-Visitor", KindScheme, "Cloudflare ({\"scheme\":\"https\"})"},
	{"X-ARR-SSL", KindScheme, "IIS ARR"},
	{"X-Forwarded-Prefix", KindPath, "ASP.NET Core (PathBase), Spring"},
	{"X-Original-Prefix", KindPath, "ASP.NET Core ForwardedHeaders"},
	{"X-Original-URL", KindPath, "IIS URL Rewrite"},
	{"X-Rewrite-URL", KindPath, "IIS URL Rewrite"},
	{"X-Forwarded-Uri", KindPath, "Traefik ForwardAuth, Authelia"},
	{"X-Original-Uri", KindPath, "ingress-nginx auth, nginx auth_request setups"},
	{"X-Forwarded-Path", KindPath, "Kong, Spring Cloud Gateway"},
	{"X-Envoy-Original-Path", KindPath, "Envoy"},
	{"X-Script-Name", KindPath, "Flask and Django behind nginx (SCRIPT_NAME)"},
	{"X-Forwarded-Client-Cert", KindCertificate, "Envoy (XFCC), Istio"},
	{"X-SSL-Client-Cert", KindCertificate, "nginx and HAProxy setups, Spring"},
	{"X-Client-Cert", KindCertificate, "Google Cloud load balancers, Spring"},
	{"SSL-Client-Cert", KindCertificate, "Apache mod_ssl setups"},
	{"SSL_CLIENT_CERT", KindCertificate, "Tomcat SSLValve, Apache"},
	{"SSL_CIPHER", KindCertificate, "Tomcat SSLValve"},
	{"SSL_SESSION_ID", KindCertificate, "Tomcat SSLValve"},
	{"SSL_CIPHER_USEKEYSIZE", KindCertificate, "Tomcat SSLValve"},
	{"X-Client-Verify", KindCertificate, "nginx and HAProxy setups"},
	{"X-SSL-Client-Verify", KindCertificate, "nginx and HAProxy setups"},
	{"X-SSL-Client-DN", KindCertificate, "nginx and HAProxy setups"},
	{"X-SSL-Client-CN", KindCertificate, "HAProxy setups"},
	{"X-SSL-Issuer", KindCertificate, "HAProxy setups"},
	{"X-ARR-ClientCert", KindCertificate, "ASP.NET Core CertificateForwarding, IIS ARR"},
	{"X-Forwarded-Tls-Client-Cert", KindCertificate, "Traefik"},
	{"X-Forwarded-Tls-Client-Cert-Info", KindCertificate, "Traefik"},
	{"X-Amzn-Mtls-Clientcert", KindCertificate, "AWS ALB mutual TLS"},
	{"X-HTTP-Method-Override", KindMethod, "Express method-override, ASP.NET Web API, Google APIs, Spring (HiddenHttpMethodFilter's kin)"},
	{"X-HTTP-Method", KindMethod, "OData, ASP.NET"},
	{"X-Method-Override", KindMethod, "Express method-override, Symfony"},
	{"X-Forwarded-Method", KindMethod, "Traefik ForwardAuth, Authelia"},
}

// Stripper removes from a request the claims its peer may not make.
type Stripper struct {
	// fromTrusted maps each stripped header, by its canonical name, to
	// whether it passes from a trusted peer.
	fromTrusted map[string]bool
}

// NewStripper returns a stripper of Claims: method overrides only if
// stripMethodOverrides; and the headers of passFromTrusted (names of
// Claims, in any case) passed on from a trusted peer.
func NewStripper(passFromTrusted []string, stripMethodOverrides bool) (*Stripper, error) {
	s := &Stripper{fromTrusted: make(map[string]bool, len(Claims))}
	for _, c := range Claims {
		if c.Kind == KindMethod && !stripMethodOverrides {
			continue
		}
		s.fromTrusted[http.CanonicalHeaderKey(c.Header)] = c.FromTrusted()
	}
	for _, name := range passFromTrusted {
		key := http.CanonicalHeaderKey(name)
		if _, ok := s.fromTrusted[key]; !ok {
			return nil, fmt.Errorf("%s is not a header the forwarded handler strips", name)
		}
		s.fromTrusted[key] = true
	}
	return s, nil
}

// Strip removes from h every claim its peer may not make: trusted tells
// whether the peer is a trusted proxy. Go's HTTP servers file headers by
// their canonical name, so every letter case and every repeat of a name
// is one entry.
func (s *Stripper) Strip(h http.Header, trusted bool) {
	for k := range h {
		if fromTrusted, ok := s.fromTrusted[k]; ok && !(trusted && fromTrusted) {
			delete(h, k)
		}
	}
}
