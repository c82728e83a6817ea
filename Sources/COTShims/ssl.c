#include "ot_shims_ssl.h"
#include <openssl/crypto.h>

/* OpenSSL frees its global state from an atexit handler unless told not to at its first initialisation. A program
   that exits while one of the library's IO threads is still in a DTLS handshake or drawing random bytes would then
   crash on its way out; the library asks OpenSSL to leave its state to the end of the process instead. */
__attribute__((constructor)) static void otshim_openssl_without_atexit(void) {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

long otshim_bio_set_mem_eof_return(BIO *bio, int v) { return BIO_set_mem_eof_return(bio, v); }
long otshim_ssl_set_mtu(SSL *ssl, long mtu) { return SSL_set_mtu(ssl, mtu); }
int otshim_dtls_get_timeout_usec(SSL *ssl, long long *usec) {
    struct timeval tv;
    if (DTLSv1_get_timeout(ssl, &tv) != 1) return 0;
    *usec = (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
    return 1;
}
int otshim_dtls_handle_timeout(SSL *ssl) { return (int)DTLSv1_handle_timeout(ssl); }
size_t otshim_bio_pending(BIO *bio) { return BIO_ctrl_pending(bio); }

#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/x509.h>
#include <string.h>
#include <stdlib.h>

EVP_PKEY *otshim_ec_p256_keygen(void) { return EVP_EC_gen("P-256"); }

int otshim_ssl_ctx_dtls12_only(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) == 1 && SSL_CTX_set_max_proto_version(ctx, DTLS1_2_VERSION) == 1;
}

/* DTLS retransmission timer (DTLS_set_timer_cb): OpenSSL asks for the timeout of a flight, passing 0 for a new
   flight and the previous timeout for a retransmission. The SSL's ot_dtls_timer holds the answer, the same every time:
   the driver schedules retransmissions (and their back-off) itself, and OpenSSL's timer only has to be due by then,
   instead of OpenSSL's 1 s doubling per retransmission. */
struct ot_dtls_timer { unsigned int timeout_us; };
static CRYPTO_ONCE ot_timer_once = CRYPTO_ONCE_STATIC_INIT;
static int ot_timer_index = -1;
static void ot_timer_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent; (void)ad; (void)idx; (void)argl; (void)argp;
    free(ptr);
}
static void ot_timer_init(void) { ot_timer_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, ot_timer_free); }
static unsigned int ot_dtls_timer_cb(SSL *s, unsigned int timer_us) {
    const struct ot_dtls_timer *t = ot_timer_index >= 0 ? SSL_get_ex_data(s, ot_timer_index) : NULL;
    (void)timer_us;
    return t != NULL ? t->timeout_us : 1000000u;
}

int otshim_dtls_set_timer(SSL *ssl, unsigned int timeout_us) {
    if (timeout_us == 0) return 0;
    if (!CRYPTO_THREAD_run_once(&ot_timer_once, ot_timer_init) || ot_timer_index < 0) return 0;
    struct ot_dtls_timer *t = SSL_get_ex_data(ssl, ot_timer_index);
    if (t == NULL) {
        t = malloc(sizeof *t);
        if (t == NULL) return 0;
        if (!SSL_set_ex_data(ssl, ot_timer_index, t)) { free(t); return 0; }
        DTLS_set_timer_cb(ssl, ot_dtls_timer_cb);
    }
    t->timeout_us = timeout_us;
    return 1;
}

static CRYPTO_ONCE ot_fp_once = CRYPTO_ONCE_STATIC_INIT;
static int ot_fp_index = -1;
static void ot_fp_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
    (void)parent; (void)ad; (void)idx; (void)argl; (void)argp;
    free(ptr);
}
static void ot_fp_init(void) { ot_fp_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, ot_fp_free); }

static int ot_verify_cb(int preverify_ok, X509_STORE_CTX *store) {
    (void)preverify_ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    if (ssl == NULL) return 0;
    if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;  /* self-signed: only the leaf matters */
    const unsigned char *expected = ot_fp_index >= 0 ? SSL_get_ex_data(ssl, ot_fp_index) : NULL;
    if (expected == NULL) return 1;  /* checked after the handshake */
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (cert == NULL || X509_digest(cert, EVP_sha256(), md, &len) != 1 || len != 32) return 0;
    if (memcmp(md, expected, 32) != 0) {
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_SIGNATURE_FAILURE);
        return 0;
    }
    return 1;
}

int otshim_dtls_prepare(SSL *ssl) {
    if (!CRYPTO_THREAD_run_once(&ot_fp_once, ot_fp_init) || ot_fp_index < 0) return 0;
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, ot_verify_cb);
    return 1;
}

int otshim_dtls_expect_peer_sha256(SSL *ssl, const unsigned char *sha256) {
    if (!CRYPTO_THREAD_run_once(&ot_fp_once, ot_fp_init) || ot_fp_index < 0) return 0;
    unsigned char *copy = malloc(32);
    if (copy == NULL) return 0;
    memcpy(copy, sha256, 32);
    free(SSL_get_ex_data(ssl, ot_fp_index));
    return SSL_set_ex_data(ssl, ot_fp_index, copy);
}

int otshim_ssl_peer_cert_sha256(SSL *ssl, unsigned char *out) {
    X509 *cert = SSL_get1_peer_certificate(ssl);
    if (cert == NULL) return 0;
    unsigned int len = 0;
    int ok = X509_digest(cert, EVP_sha256(), out, &len) == 1 && len == 32;
    X509_free(cert);
    return ok;
}

/* ---- TLS over TCP ---- */
#include <openssl/x509v3.h>
#include <openssl/err.h>

SSL_CTX *otshim_tls_ctx_new(int server) {
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (ctx == NULL) return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    uint64_t opts = SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION;
    if (server) opts |= SSL_OP_CIPHER_SERVER_PREFERENCE;
    SSL_CTX_set_options(ctx, opts);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

void otshim_tls_ctx_verify_peer(SSL_CTX *ctx) { SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL); }

int otshim_tls_set_sni(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

int otshim_tls_expect_host(SSL *ssl, const char *host, int is_ip) {
    if (is_ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set1_host(ssl, host);
}

void otshim_tls_last_error(char *buf, size_t size) {
    if (size == 0) return;
    buf[0] = 0;
    unsigned long e = ERR_get_error();
    if (e != 0) ERR_error_string_n(e, buf, size);
    ERR_clear_error();
}
