#include "ot_shims_ssl.h"

long ot_bio_set_mem_eof_return(BIO *bio, int v) { return BIO_set_mem_eof_return(bio, v); }
long ot_ssl_set_mtu(SSL *ssl, long mtu) { return SSL_set_mtu(ssl, mtu); }
int ot_dtls_get_timeout_usec(SSL *ssl, long long *usec) {
    struct timeval tv;
    if (DTLSv1_get_timeout(ssl, &tv) != 1) return 0;
    *usec = (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
    return 1;
}
int ot_dtls_handle_timeout(SSL *ssl) { return (int)DTLSv1_handle_timeout(ssl); }
size_t ot_bio_pending(BIO *bio) { return BIO_ctrl_pending(bio); }
