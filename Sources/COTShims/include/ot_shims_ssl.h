/* OpenSSL function-like macros, as functions. */
#ifndef OT_SHIMS_SSL_H
#define OT_SHIMS_SSL_H
#include <openssl/ssl.h>
#include <openssl/bio.h>

/** BIO_set_mem_eof_return(bio, v). */
long otshim_bio_set_mem_eof_return(BIO *bio, int v);
/** SSL_set_mtu(ssl, mtu). */
long otshim_ssl_set_mtu(SSL *ssl, long mtu);
/** DTLSv1_get_timeout(ssl, tv): 1 with a pending timer (microseconds in *usec), 0 without. */
int otshim_dtls_get_timeout_usec(SSL *ssl, long long *usec);
/** DTLSv1_handle_timeout(ssl). */
int otshim_dtls_handle_timeout(SSL *ssl);
/** BIO_ctrl_pending(bio). */
size_t otshim_bio_pending(BIO *bio);
/** EVP_EC_gen("P-256") (a macro over a variadic function): a new ECDSA P-256 key, or NULL. */
EVP_PKEY *otshim_ec_p256_keygen(void);
/** Restricts a context to DTLS 1.2 (SSL_CTX_set_min/max_proto_version are macros). Returns 1 on success. */
int otshim_ssl_ctx_dtls12_only(SSL_CTX *ctx);
/** Prepares a DTLS SSL for a sans-IO driver: peer certificates are checked by `otshim_dtls_expect_peer_sha256`
 *  (any certificate is accepted while no fingerprint is set). Returns 1 on success. */
int otshim_dtls_prepare(SSL *ssl);
/** Sets OpenSSL's DTLS retransmission timer (DTLS_set_timer_cb) to timeout_us for a new flight and for every
 *  retransmission, without back-off (the driver schedules retransmissions and backs off itself; OpenSSL repeats a
 *  flight only once its timer expired). May be called again to change it. Returns 1 on success. */
int otshim_dtls_set_timer(SSL *ssl, unsigned int timeout_us);
/** Sets the SHA-256 fingerprint (32 bytes) the peer's certificate must have; a mismatch fails the handshake
 *  with a bad_certificate alert. Returns 1 on success. */
int otshim_dtls_expect_peer_sha256(SSL *ssl, const unsigned char *sha256);
/** SSL_get_peer_certificate's SHA-256 into out[32]. Returns 1 when the peer sent a certificate. */
int otshim_ssl_peer_cert_sha256(SSL *ssl, unsigned char *out);

/* TLS over TCP (signaling, TURN over TLS): contexts and streams for sans-IO drivers on memory BIOs. */

/** A TLS context for TLS 1.2 and 1.3 only, without compression or renegotiation, with SSL_MODE_RELEASE_BUFFERS
 *  (idle connections give their record buffers back) and partial writes allowed. `server`: server ciphers
 *  (ECDHE with AES-GCM or ChaCha20 for TLS 1.2) preferred over the client's. NULL on failure. */
SSL_CTX *otshim_tls_ctx_new(int server);
/** Client side: verify the peer's chain against the context's trust store. */
void otshim_tls_ctx_verify_peer(SSL_CTX *ctx);
/** SSL_set_tlsext_host_name (a macro): the SNI name. Returns 1 on success. */
int otshim_tls_set_sni(SSL *ssl, const char *name);
/** The certificate must be for `host`: a DNS name (SSL_set1_host) or an IP literal (its IP SAN). Returns 1 on success. */
int otshim_tls_expect_host(SSL *ssl, const char *host, int is_ip);
/** The oldest error on this thread's OpenSSL error queue as text (empty when none); the queue is cleared. */
void otshim_tls_last_error(char *buf, size_t size);
#endif
