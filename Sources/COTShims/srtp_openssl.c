/* libsrtp2's ciphers and authentication from OpenSSL's libcrypto.
 *
 * Debian builds libsrtp2 against NSS, which sets up a PK11 context on every srtp_protect/srtp_unprotect (a lock;
 * 5 allocations per AES-GCM call, 14 per AES-CM with HMAC-SHA1). libsrtp lets a program supply its own
 * implementation of a cipher or authentication id (srtp_replace_cipher_type / srtp_replace_auth_type); libsrtp keeps
 * doing SRTP itself (key derivation, packet index and ROC, replay, packet layout, where the tag goes), and calls these
 * types for the primitives only. Each instance owns one OpenSSL context, made at alloc and keyed at init; a packet
 * only resets its IV, so no packet allocates in AES-ICM or AES-GCM. HMAC-SHA1 goes through EVP_MAC, whose
 * re-initialisation in OpenSSL 3.0 duplicates the digest state (one allocation at start, one at the tag). */
#include "ot_shims_srtp.h"
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 16, ICM_BLOCKS_PER_IV = 1 << 16, SHA1_LENGTH = 20, GCM_TAG = 16, GCM_TAG_SHORT = 8 };

/* One block per cipher instance: libsrtp's handle first, our state after it. */
typedef struct {
    srtp_cipher_t cipher;
    EVP_CIPHER_CTX *ctx;
    int key_size;                  /* AES key octets (the key libsrtp passes has the salt after them) */
    int tag_len;                   /* GCM */
    srtp_cipher_direction_t dir;   /* GCM: set by set_iv */
    uint8_t offset[BLOCK];         /* ICM: the salt, its last two octets zero (the block counter) */
    size_t keystream_left;         /* ICM: octets before the 16-bit block counter would wrap */
} ot_cipher;

static srtp_err_status_t cipher_alloc(srtp_cipher_t **c, const srtp_cipher_type_t *type, int key_len, int key_size,
                                      int tag_len) {
    ot_cipher *s = calloc(1, sizeof *s);
    if (!s) return srtp_err_status_alloc_fail;
    s->ctx = EVP_CIPHER_CTX_new();
    if (!s->ctx) {
        free(s);
        return srtp_err_status_alloc_fail;
    }
    s->cipher.type = type;
    s->cipher.state = s;
    s->cipher.key_len = key_len;
    s->cipher.algorithm = (int)type->id;
    s->key_size = key_size;
    s->tag_len = tag_len;
    s->dir = srtp_direction_any;
    *c = &s->cipher;
    return srtp_err_status_ok;
}

static srtp_err_status_t cipher_dealloc(srtp_cipher_t *c) {
    if (!c) return srtp_err_status_bad_param;
    ot_cipher *s = c->state;
    EVP_CIPHER_CTX_free(s->ctx);
    OPENSSL_cleanse(s, sizeof *s);
    free(s);
    return srtp_err_status_ok;
}

/* AES-ICM (RFC 3711 4.1.1): AES-CTR whose first counter block is the salt XOR the IV libsrtp forms (SSRC, index;
 * for key derivation the label). Decryption is the same operation. */

static const srtp_cipher_type_t icm_128, icm_192, icm_256;

static srtp_err_status_t icm_alloc(srtp_cipher_t **c, int key_len, int tag_len) {
    (void)tag_len;
    switch (key_len) {
    case SRTP_AES_ICM_128_KEY_LEN_WSALT: return cipher_alloc(c, &icm_128, key_len, SRTP_AES_128_KEY_LEN, 0);
    case SRTP_AES_ICM_192_KEY_LEN_WSALT: return cipher_alloc(c, &icm_192, key_len, SRTP_AES_192_KEY_LEN, 0);
    case SRTP_AES_ICM_256_KEY_LEN_WSALT: return cipher_alloc(c, &icm_256, key_len, SRTP_AES_256_KEY_LEN, 0);
    default: return srtp_err_status_bad_param;
    }
}

static srtp_err_status_t icm_init(void *state, const uint8_t *key) {
    ot_cipher *s = state;
    const EVP_CIPHER *evp = s->key_size == SRTP_AES_256_KEY_LEN   ? EVP_aes_256_ctr()
                            : s->key_size == SRTP_AES_192_KEY_LEN ? EVP_aes_192_ctr()
                                                                  : EVP_aes_128_ctr();
    memset(s->offset, 0, sizeof s->offset);
    memcpy(s->offset, key + s->key_size, SRTP_SALT_LEN);
    s->keystream_left = 0;
    return EVP_EncryptInit_ex(s->ctx, evp, NULL, key, NULL) == 1 ? srtp_err_status_ok : srtp_err_status_init_fail;
}

static srtp_err_status_t icm_set_iv(void *state, uint8_t *iv, srtp_cipher_direction_t direction) {
    (void)direction;
    ot_cipher *s = state;
    uint8_t counter[BLOCK];
    for (int i = 0; i < BLOCK; i++) counter[i] = s->offset[i] ^ iv[i];
    /* OpenSSL's counter is all 128 bits; SRTP's block counter is the last 16: stop where it would carry. */
    s->keystream_left = (size_t)(ICM_BLOCKS_PER_IV - ((counter[BLOCK - 2] << 8) | counter[BLOCK - 1])) * BLOCK;
    return EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, counter) == 1 ? srtp_err_status_ok : srtp_err_status_init_fail;
}

static srtp_err_status_t icm_encrypt(void *state, uint8_t *buffer, unsigned int *octets) {
    ot_cipher *s = state;
    if (*octets == 0) return srtp_err_status_ok;
    if (*octets > s->keystream_left || *octets > INT_MAX) return srtp_err_status_terminus;
    int out = 0;
    if (EVP_EncryptUpdate(s->ctx, buffer, &out, buffer, (int)*octets) != 1 || out != (int)*octets)
        return srtp_err_status_cipher_fail;
    s->keystream_left -= *octets;
    return srtp_err_status_ok;
}

/* AES-GCM (RFC 7714): libsrtp sets the IV, the AAD, then encrypts and asks for the tag, which it appends; to decrypt
 * it passes the ciphertext with the tag at its end, and the length comes back without it. */

static const srtp_cipher_type_t gcm_128, gcm_256;

static srtp_err_status_t gcm_alloc(srtp_cipher_t **c, int key_len, int tag_len) {
    if (tag_len != GCM_TAG && tag_len != GCM_TAG_SHORT) return srtp_err_status_bad_param;
    switch (key_len) {
    case SRTP_AES_GCM_128_KEY_LEN_WSALT: return cipher_alloc(c, &gcm_128, key_len, SRTP_AES_128_KEY_LEN, tag_len);
    case SRTP_AES_GCM_256_KEY_LEN_WSALT: return cipher_alloc(c, &gcm_256, key_len, SRTP_AES_256_KEY_LEN, tag_len);
    default: return srtp_err_status_bad_param;
    }
}

static srtp_err_status_t gcm_init(void *state, const uint8_t *key) {
    ot_cipher *s = state;
    const EVP_CIPHER *evp = s->key_size == SRTP_AES_256_KEY_LEN ? EVP_aes_256_gcm() : EVP_aes_128_gcm();
    s->dir = srtp_direction_any;
    return EVP_CipherInit_ex(s->ctx, evp, NULL, key, NULL, 1) == 1 ? srtp_err_status_ok : srtp_err_status_init_fail;
}

static srtp_err_status_t gcm_set_iv(void *state, uint8_t *iv, srtp_cipher_direction_t direction) {
    ot_cipher *s = state;
    if (direction != srtp_direction_encrypt && direction != srtp_direction_decrypt) return srtp_err_status_bad_param;
    s->dir = direction;
    return EVP_CipherInit_ex(s->ctx, NULL, NULL, NULL, iv, direction == srtp_direction_encrypt) == 1
               ? srtp_err_status_ok
               : srtp_err_status_init_fail;
}

static srtp_err_status_t gcm_set_aad(void *state, const uint8_t *aad, uint32_t aad_len) {
    ot_cipher *s = state;
    if (s->dir == srtp_direction_any || aad_len > INT_MAX) return srtp_err_status_bad_param;
    int out = 0;
    if (aad_len == 0) return srtp_err_status_ok;
    return EVP_CipherUpdate(s->ctx, NULL, &out, aad, (int)aad_len) == 1 ? srtp_err_status_ok : srtp_err_status_algo_fail;
}

static srtp_err_status_t gcm_encrypt(void *state, uint8_t *buffer, unsigned int *octets) {
    ot_cipher *s = state;
    if (s->dir != srtp_direction_encrypt || *octets > INT_MAX) return srtp_err_status_bad_param;
    int out = 0;
    if (*octets == 0) return srtp_err_status_ok; /* SRTCP without encryption: the tag covers the AAD only */
    if (EVP_CipherUpdate(s->ctx, buffer, &out, buffer, (int)*octets) != 1 || out != (int)*octets)
        return srtp_err_status_cipher_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_get_tag(void *state, uint8_t *tag, uint32_t *length) {
    ot_cipher *s = state;
    if (s->dir != srtp_direction_encrypt) return srtp_err_status_bad_param;
    int out = 0;
    if (EVP_CipherFinal_ex(s->ctx, tag, &out) != 1 ||
        EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, s->tag_len, tag) != 1)
        return srtp_err_status_algo_fail;
    *length = (uint32_t)s->tag_len;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_decrypt(void *state, uint8_t *buffer, unsigned int *octets) {
    ot_cipher *s = state;
    if (s->dir != srtp_direction_decrypt || *octets > INT_MAX) return srtp_err_status_bad_param;
    if (*octets < (unsigned int)s->tag_len) return srtp_err_status_auth_fail;
    unsigned int text = *octets - (unsigned int)s->tag_len;
    int out = 0;
    if (EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_TAG, s->tag_len, buffer + text) != 1)
        return srtp_err_status_auth_fail;
    if (text > 0 && (EVP_CipherUpdate(s->ctx, buffer, &out, buffer, (int)text) != 1 || out != (int)text))
        return srtp_err_status_cipher_fail;
    if (EVP_CipherFinal_ex(s->ctx, buffer + text, &out) != 1) return srtp_err_status_auth_fail;
    *octets = text;
    return srtp_err_status_ok;
}

/* HMAC-SHA1 (RFC 2104): libsrtp keys it once (init), then per packet starts it, feeds the packet and asks for the
 * tag, the first out_len octets of the digest. */

typedef struct {
    srtp_auth_t auth;
    EVP_MAC_CTX *ctx;
} ot_hmac;

static const srtp_auth_type_t hmac_sha1;

static srtp_err_status_t hmac_alloc(srtp_auth_t **a, int key_len, int out_len) {
    if (key_len < 0 || out_len < 0 || out_len > SHA1_LENGTH) return srtp_err_status_bad_param;
    ot_hmac *h = calloc(1, sizeof *h);
    if (!h) return srtp_err_status_alloc_fail;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL);
    h->ctx = mac ? EVP_MAC_CTX_new(mac) : NULL; /* the context keeps its own reference to the MAC */
    EVP_MAC_free(mac);
    if (!h->ctx) {
        free(h);
        return srtp_err_status_alloc_fail;
    }
    h->auth.type = &hmac_sha1;
    h->auth.state = h;
    h->auth.out_len = out_len;
    h->auth.key_len = key_len;
    h->auth.prefix_len = 0;
    *a = &h->auth;
    return srtp_err_status_ok;
}

static srtp_err_status_t hmac_dealloc(srtp_auth_t *a) {
    if (!a) return srtp_err_status_bad_param;
    ot_hmac *h = a->state;
    EVP_MAC_CTX_free(h->ctx);
    OPENSSL_cleanse(h, sizeof *h);
    free(h);
    return srtp_err_status_ok;
}

static srtp_err_status_t hmac_init(void *state, const uint8_t *key, int key_len) {
    ot_hmac *h = state;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA1", 0), OSSL_PARAM_END};
    return EVP_MAC_init(h->ctx, key, (size_t)key_len, params) == 1 ? srtp_err_status_ok : srtp_err_status_init_fail;
}

static srtp_err_status_t hmac_start(void *state) {
    ot_hmac *h = state;
    return EVP_MAC_init(h->ctx, NULL, 0, NULL) == 1 ? srtp_err_status_ok : srtp_err_status_auth_fail;
}

static srtp_err_status_t hmac_update(void *state, const uint8_t *message, int octets) {
    ot_hmac *h = state;
    if (octets < 0) return srtp_err_status_bad_param;
    return EVP_MAC_update(h->ctx, message, (size_t)octets) == 1 ? srtp_err_status_ok : srtp_err_status_auth_fail;
}

static srtp_err_status_t hmac_compute(void *state, const uint8_t *message, int octets, int tag_len, uint8_t *tag) {
    ot_hmac *h = state;
    uint8_t digest[SHA1_LENGTH];
    size_t length = 0;
    if (tag_len < 0 || tag_len > SHA1_LENGTH) return srtp_err_status_bad_param;
    srtp_err_status_t status = hmac_update(state, message, octets);
    if (status != srtp_err_status_ok) return status;
    if (EVP_MAC_final(h->ctx, digest, &length, sizeof digest) != 1 || length != SHA1_LENGTH)
        return srtp_err_status_auth_fail;
    memcpy(tag, digest, (size_t)tag_len);
    OPENSSL_cleanse(digest, sizeof digest);
    return srtp_err_status_ok;
}

/* Known answers libsrtp checks each type against before it takes it (srtp_cipher_type_self_test and
 * srtp_auth_type_self_test, then the vectors of the type it replaces). */

/* RFC 3711 B.2: AES-CM keystream (session key and salt, packet index 0). */
static const uint8_t rfc3711_b2_key[30] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88,
    0x09, 0xcf, 0x4f, 0x3c, 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
    0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd,
};
static const uint8_t rfc3711_b2_keystream[48] = {
    0xe0, 0x3e, 0xad, 0x09, 0x35, 0xc9, 0x5e, 0x80, 0xe1, 0x66, 0xb1, 0x6d,
    0xd9, 0x2b, 0x4e, 0xb4, 0xd2, 0x35, 0x13, 0x16, 0x2b, 0x02, 0xd0, 0xf7,
    0x2a, 0x43, 0xa2, 0xfe, 0x4a, 0x5f, 0x97, 0xab, 0x41, 0xe9, 0x5b, 0x3b,
    0xb0, 0xa2, 0xe8, 0xdd, 0x47, 0x79, 0x01, 0xe4, 0xfc, 0xa8, 0x94, 0xc0,
};
/* RFC 3711 B.3: key derivation is AES-CM under the master key and salt, the label in octet 7 of the IV. */
static const uint8_t rfc3711_b3_master[30] = {
    0xe1, 0xf9, 0x7a, 0x0d, 0x3e, 0x01, 0x8b, 0xe0, 0xd6, 0x4f, 0xa3, 0x2c,
    0x06, 0xde, 0x41, 0x39, 0x0e, 0xc6, 0x75, 0xad, 0x49, 0x8a, 0xfe, 0xeb,
    0xb6, 0x96, 0x0b, 0x3a, 0xab, 0xe6,
};
static const uint8_t rfc3711_b3_cipher_key[16] = {
    0xc6, 0x1e, 0x7a, 0x93, 0x74, 0x4f, 0x39, 0xee, 0x10, 0x73, 0x4a, 0xfe,
    0x3f, 0xf7, 0xa0, 0x87,
};
static const uint8_t rfc3711_b3_auth_key[20] = {
    0xce, 0xbe, 0x32, 0x1f, 0x6f, 0xf7, 0x71, 0x6b, 0x6f, 0xd4, 0xab, 0x49,
    0xaf, 0x25, 0x6a, 0x15, 0x6d, 0x38, 0xba, 0xa4,
};
static const uint8_t rfc3711_b3_salt[14] = {
    0x30, 0xcb, 0xbc, 0x08, 0x86, 0x3d, 0x8c, 0x85, 0xd4, 0x9d, 0xb3, 0x4a,
    0x9a, 0xe1,
};
/* RFC 6188 7.3 and 7.1: AES-192-CM and AES-256-CM keystreams (salt and IV as in RFC 3711 B.2). */
static const uint8_t rfc6188_192_key[38] = {
    0xea, 0xb2, 0x34, 0x76, 0x4e, 0x51, 0x7b, 0x2d, 0x3d, 0x16, 0x0d, 0x58,
    0x7d, 0x8c, 0x86, 0x21, 0x97, 0x40, 0xf6, 0x5f, 0x99, 0xb6, 0xbc, 0xf7,
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb,
    0xfc, 0xfd,
};
static const uint8_t rfc6188_192_keystream[48] = {
    0x35, 0x09, 0x6c, 0xba, 0x46, 0x10, 0x02, 0x8d, 0xc1, 0xb5, 0x75, 0x03,
    0x80, 0x4c, 0xe3, 0x7c, 0x5d, 0xe9, 0x86, 0x29, 0x1d, 0xcc, 0xe1, 0x61,
    0xd5, 0x16, 0x5e, 0xc4, 0x56, 0x8f, 0x5c, 0x9a, 0x47, 0x4a, 0x40, 0xc7,
    0x78, 0x94, 0xbc, 0x17, 0x18, 0x02, 0x02, 0x27, 0x2a, 0x4c, 0x26, 0x4d,
};
static const uint8_t rfc6188_256_key[46] = {
    0x57, 0xf8, 0x2f, 0xe3, 0x61, 0x3f, 0xd1, 0x70, 0xa8, 0x5e, 0xc9, 0x3c,
    0x40, 0xb1, 0xf0, 0x92, 0x2e, 0xc4, 0xcb, 0x0d, 0xc0, 0x25, 0xb5, 0x82,
    0x72, 0x14, 0x7c, 0xc4, 0x38, 0x94, 0x4a, 0x98, 0xf0, 0xf1, 0xf2, 0xf3,
    0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd,
};
static const uint8_t rfc6188_256_keystream[48] = {
    0x92, 0xbd, 0xd2, 0x8a, 0x93, 0xc3, 0xf5, 0x25, 0x11, 0xc6, 0x77, 0xd0,
    0x8b, 0x55, 0x15, 0xa4, 0x9d, 0xa7, 0x1b, 0x23, 0x78, 0xa8, 0x54, 0xf6,
    0x70, 0x50, 0x75, 0x6d, 0xed, 0x16, 0x5b, 0xac, 0x63, 0xc4, 0x86, 0x8b,
    0x70, 0x96, 0xd8, 0x84, 0x21, 0xb5, 0x63, 0xb8, 0xc9, 0x4c, 0x9a, 0x31,
};
/* RFC 7714 16 and 17: session keys 00..0f / 00..1f (the salt, "Quid pro quo", only forms the IVs below); the RTP
   header is the AAD; the ciphertext carries the 16-octet tag. 16.1.1 and 16.2.1: an RTP packet; 17.1: an SRTCP
   packet (AAD: header and E-flag|index). */
static const uint8_t rfc7714_key_128[28] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    0x0c, 0x0d, 0x0e, 0x0f, 0x51, 0x75, 0x69, 0x64, 0x20, 0x70, 0x72, 0x6f,
    0x20, 0x71, 0x75, 0x6f,
};
static const uint8_t rfc7714_key_256[44] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
    0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x51, 0x75, 0x69, 0x64,
    0x20, 0x70, 0x72, 0x6f, 0x20, 0x71, 0x75, 0x6f,
};
static const uint8_t rfc7714_rtp_header[12] = {
    0x80, 0x40, 0xf1, 0x7b, 0x80, 0x41, 0xf8, 0xd3, 0x55, 0x01, 0xa0, 0xb2,
};
static const uint8_t rfc7714_rtp_payload[38] = {
    0x47, 0x61, 0x6c, 0x6c, 0x69, 0x61, 0x20, 0x65, 0x73, 0x74, 0x20, 0x6f,
    0x6d, 0x6e, 0x69, 0x73, 0x20, 0x64, 0x69, 0x76, 0x69, 0x73, 0x61, 0x20,
    0x69, 0x6e, 0x20, 0x70, 0x61, 0x72, 0x74, 0x65, 0x73, 0x20, 0x74, 0x72,
    0x65, 0x73,
};
static const uint8_t rfc7714_16_1_1[54] = {
    0xf2, 0x4d, 0xe3, 0xa3, 0xfb, 0x34, 0xde, 0x6c, 0xac, 0xba, 0x86, 0x1c,
    0x9d, 0x7e, 0x4b, 0xca, 0xbe, 0x63, 0x3b, 0xd5, 0x0d, 0x29, 0x4e, 0x6f,
    0x42, 0xa5, 0xf4, 0x7a, 0x51, 0xc7, 0xd1, 0x9b, 0x36, 0xde, 0x3a, 0xdf,
    0x88, 0x33, 0x89, 0x9d, 0x7f, 0x27, 0xbe, 0xb1, 0x6a, 0x91, 0x52, 0xcf,
    0x76, 0x5e, 0xe4, 0x39, 0x0c, 0xce,
};
static const uint8_t rfc7714_16_2_1[54] = {
    0x32, 0xb1, 0xde, 0x78, 0xa8, 0x22, 0xfe, 0x12, 0xef, 0x9f, 0x78, 0xfa,
    0x33, 0x2e, 0x33, 0xaa, 0xb1, 0x80, 0x12, 0x38, 0x9a, 0x58, 0xe2, 0xf3,
    0xb5, 0x0b, 0x2a, 0x02, 0x76, 0xff, 0xae, 0x0f, 0x1b, 0xa6, 0x37, 0x99,
    0xb8, 0x7b, 0x7a, 0xa3, 0xdb, 0x36, 0xdf, 0xff, 0xd6, 0xb0, 0xf9, 0xbb,
    0x78, 0x78, 0xd7, 0xa7, 0x6c, 0x13,
};
static const uint8_t rfc7714_rtcp_aad[12] = {
    0x81, 0xc8, 0x00, 0x0d, 0x4d, 0x61, 0x72, 0x73, 0x80, 0x00, 0x05, 0xd4,
};
static const uint8_t rfc7714_rtcp_payload[44] = {
    0x4e, 0x54, 0x50, 0x31, 0x4e, 0x54, 0x50, 0x32, 0x52, 0x54, 0x50, 0x20,
    0x00, 0x00, 0x04, 0x2a, 0x00, 0x00, 0xe9, 0x30, 0x4c, 0x75, 0x6e, 0x61,
    0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef,
    0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef,
};
static const uint8_t rfc7714_17_1[60] = {
    0x63, 0xe9, 0x48, 0x85, 0xdc, 0xda, 0xb6, 0x7c, 0xa7, 0x27, 0xd7, 0x66,
    0x2f, 0x6b, 0x7e, 0x99, 0x7f, 0xf5, 0xc0, 0xf7, 0x6c, 0x06, 0xf3, 0x2d,
    0xc6, 0x76, 0xa5, 0xf1, 0x73, 0x0d, 0x6f, 0xda, 0x4c, 0xe0, 0x9b, 0x46,
    0x86, 0x30, 0x3d, 0xed, 0x0b, 0xb9, 0x27, 0x5b, 0xc8, 0x4a, 0xa4, 0x58,
    0x96, 0xcf, 0x4d, 0x2f, 0xc5, 0xab, 0xf8, 0x72, 0x45, 0xd9, 0xea, 0xde,
};
/* RFC 2202 3, tests 1 and 2 (test 2's tag truncated to SRTP's 80 bits). */
static const uint8_t rfc2202_1_tag[20] = {
    0xb6, 0x17, 0x31, 0x86, 0x55, 0x05, 0x72, 0x64, 0xe2, 0x8b, 0xc0, 0xb6,
    0xfb, 0x37, 0x8c, 0x8e, 0xf1, 0x46, 0xbe, 0x00,
};
static const uint8_t rfc2202_2_tag[10] = {
    0xef, 0xfc, 0xdf, 0x6a, 0xe5, 0xeb, 0x2f, 0xa2, 0xd2, 0x74,
};
/* IVs as libsrtp passes them (16 octets; GCM reads the first 12). */
static uint8_t iv_zero[16] = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
static uint8_t iv_label_auth[16] = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
static uint8_t iv_label_salt[16] = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
static uint8_t iv_rfc7714_rtp[16] = { 0x51, 0x75, 0x3c, 0x65, 0x80, 0xc2, 0x72, 0x6f, 0x20, 0x71, 0x84, 0x14, 0x00, 0x00, 0x00, 0x00 };
static uint8_t iv_rfc7714_rtcp[16] = { 0x51, 0x75, 0x24, 0x05, 0x52, 0x03, 0x72, 0x6f, 0x20, 0x71, 0x70, 0xbb, 0x00, 0x00, 0x00, 0x00 };

#define CIPHER_CASE(key, iv, plain, plain_len, cipher, cipher_len, aad, aad_len, tag_len, next)                       \
    {(int)sizeof(key), key, iv, plain_len, plain, cipher_len, cipher, aad_len, aad, tag_len, next}

static const uint8_t zeros[48];

static const srtp_cipher_test_case_t icm_128_b3_auth =
    CIPHER_CASE(rfc3711_b3_master, iv_label_auth, zeros, 20, rfc3711_b3_auth_key, 20, NULL, 0, 0, NULL);
static const srtp_cipher_test_case_t icm_128_b3_salt =
    CIPHER_CASE(rfc3711_b3_master, iv_label_salt, zeros, 14, rfc3711_b3_salt, 14, NULL, 0, 0, &icm_128_b3_auth);
static const srtp_cipher_test_case_t icm_128_b3_key =
    CIPHER_CASE(rfc3711_b3_master, iv_zero, zeros, 16, rfc3711_b3_cipher_key, 16, NULL, 0, 0, &icm_128_b3_salt);
static const srtp_cipher_test_case_t icm_128_b2 =
    CIPHER_CASE(rfc3711_b2_key, iv_zero, zeros, 48, rfc3711_b2_keystream, 48, NULL, 0, 0, &icm_128_b3_key);
static const srtp_cipher_test_case_t icm_192_case =
    CIPHER_CASE(rfc6188_192_key, iv_zero, zeros, 48, rfc6188_192_keystream, 48, NULL, 0, 0, NULL);
static const srtp_cipher_test_case_t icm_256_case =
    CIPHER_CASE(rfc6188_256_key, iv_zero, zeros, 48, rfc6188_256_keystream, 48, NULL, 0, 0, NULL);
static const srtp_cipher_test_case_t gcm_128_rtcp =
    CIPHER_CASE(rfc7714_key_128, iv_rfc7714_rtcp, rfc7714_rtcp_payload, sizeof rfc7714_rtcp_payload, rfc7714_17_1,
                sizeof rfc7714_17_1, rfc7714_rtcp_aad, sizeof rfc7714_rtcp_aad, GCM_TAG, NULL);
static const srtp_cipher_test_case_t gcm_128_rtp =
    CIPHER_CASE(rfc7714_key_128, iv_rfc7714_rtp, rfc7714_rtp_payload, sizeof rfc7714_rtp_payload, rfc7714_16_1_1,
                sizeof rfc7714_16_1_1, rfc7714_rtp_header, sizeof rfc7714_rtp_header, GCM_TAG, &gcm_128_rtcp);
static const srtp_cipher_test_case_t gcm_256_rtp =
    CIPHER_CASE(rfc7714_key_256, iv_rfc7714_rtp, rfc7714_rtp_payload, sizeof rfc7714_rtp_payload, rfc7714_16_2_1,
                sizeof rfc7714_16_2_1, rfc7714_rtp_header, sizeof rfc7714_rtp_header, GCM_TAG, NULL);

static const uint8_t rfc2202_1_key[20] = {0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
                                          0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b};
static const char rfc2202_1_data[] = "Hi There", rfc2202_2_key[] = "Jefe",
                  rfc2202_2_data[] = "what do ya want for nothing?";
static const srtp_auth_test_case_t hmac_case_2 = {4, (const uint8_t *)rfc2202_2_key, 28,
                                                  (const uint8_t *)rfc2202_2_data, 10, rfc2202_2_tag, NULL};
static const srtp_auth_test_case_t hmac_case_1 = {20, rfc2202_1_key, 8, (const uint8_t *)rfc2202_1_data, 20,
                                                  rfc2202_1_tag, &hmac_case_2};

#define ICM_TYPE(name, description, tests, id)                                                                        \
    static const srtp_cipher_type_t name = {icm_alloc, cipher_dealloc, icm_init, NULL,   icm_encrypt,                  \
                                            icm_encrypt, icm_set_iv,   NULL,     description, tests, id}
#define GCM_TYPE(name, description, tests, id)                                                                        \
    static const srtp_cipher_type_t name = {gcm_alloc,   cipher_dealloc, gcm_init,    gcm_set_aad, gcm_encrypt,        \
                                            gcm_decrypt, gcm_set_iv,     gcm_get_tag, description, tests, id}

ICM_TYPE(icm_128, "AES-128 counter mode (OpenSSL EVP)", &icm_128_b2, SRTP_AES_ICM_128);
ICM_TYPE(icm_192, "AES-192 counter mode (OpenSSL EVP)", &icm_192_case, SRTP_AES_ICM_192);
ICM_TYPE(icm_256, "AES-256 counter mode (OpenSSL EVP)", &icm_256_case, SRTP_AES_ICM_256);
GCM_TYPE(gcm_128, "AES-128 GCM (OpenSSL EVP)", &gcm_128_rtp, SRTP_AES_GCM_128);
GCM_TYPE(gcm_256, "AES-256 GCM (OpenSSL EVP)", &gcm_256_rtp, SRTP_AES_GCM_256);
static const srtp_auth_type_t hmac_sha1 = {hmac_alloc, hmac_dealloc, hmac_init, hmac_compute, hmac_update, hmac_start,
                                           "HMAC-SHA1 (OpenSSL EVP_MAC)", &hmac_case_1, SRTP_HMAC_SHA1};

static const srtp_cipher_type_t *const cipher_types[] = {&icm_128, &icm_192, &icm_256, &gcm_128, &gcm_256};

const srtp_cipher_type_t *otshim_srtp_openssl_cipher_type(srtp_cipher_type_id_t id) {
    for (size_t i = 0; i < sizeof cipher_types / sizeof cipher_types[0]; i++)
        if (cipher_types[i]->id == id) return cipher_types[i];
    return NULL;
}

const srtp_auth_type_t *otshim_srtp_openssl_hmac_sha1(void) { return &hmac_sha1; }

srtp_err_status_t otshim_srtp_use_openssl(void) {
    /* Re-initialising an EVP_MAC context without a key (each packet's start) needs OpenSSL 3.0.3 or later. */
    if (OpenSSL_version_num() < 0x30000030L) return srtp_err_status_init_fail;
    for (size_t i = 0; i < sizeof cipher_types / sizeof cipher_types[0]; i++) {
        srtp_err_status_t status = srtp_replace_cipher_type(cipher_types[i], cipher_types[i]->id);
        if (status != srtp_err_status_ok) return status;
    }
    return srtp_replace_auth_type(&hmac_sha1, SRTP_HMAC_SHA1);
}
