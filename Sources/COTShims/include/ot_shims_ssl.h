/* OpenSSL function-like macros, as functions. */
#ifndef OT_SHIMS_SSL_H
#define OT_SHIMS_SSL_H
#include <openssl/ssl.h>
#include <openssl/bio.h>

/** BIO_set_mem_eof_return(bio, v). */
long ot_bio_set_mem_eof_return(BIO *bio, int v);
/** SSL_set_mtu(ssl, mtu). */
long ot_ssl_set_mtu(SSL *ssl, long mtu);
/** DTLSv1_get_timeout(ssl, tv): 1 with a pending timer (microseconds in *usec), 0 without. */
int ot_dtls_get_timeout_usec(SSL *ssl, long long *usec);
/** DTLSv1_handle_timeout(ssl). */
int ot_dtls_handle_timeout(SSL *ssl);
/** BIO_ctrl_pending(bio). */
size_t ot_bio_pending(BIO *bio);
#endif
