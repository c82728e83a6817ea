/* libsrtp2's ciphers and authentication from OpenSSL's libcrypto (srtp_openssl.c). */
#ifndef OT_SHIMS_SRTP_H
#define OT_SHIMS_SRTP_H
#include <srtp2/srtp.h>
#include <srtp2/cipher.h>
#include <srtp2/auth.h>

/** Replaces libsrtp's AES-ICM (128, 192, 256 bits), AES-GCM (128, 256) and HMAC-SHA1 with implementations over
 *  OpenSSL's EVP, through `srtp_replace_cipher_type` / `srtp_replace_auth_type` (libsrtp keeps doing SRTP: key
 *  derivation, packet index, replay, layout; only the primitives change). libsrtp runs each type's self-test and its
 *  own former type's vectors before it accepts it. Call once, after `srtp_init()` and before any `srtp_create`, from
 *  one thread. Returns `srtp_err_status_ok` when every type was replaced; otherwise the first failure, and the types
 *  not yet replaced stay libsrtp's own (Debian's: NSS). */
srtp_err_status_t otshim_srtp_use_openssl(void);

/** This file's cipher type for a libsrtp cipher id (SRTP_AES_ICM_128/192/256, SRTP_AES_GCM_128/256), or NULL. */
const srtp_cipher_type_t *otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t id);

/** This file's HMAC-SHA1 authentication type (SRTP_HMAC_SHA1). */
const srtp_auth_type_t *otshim_srtp_openssl_hmac_sha1(void);
#endif
