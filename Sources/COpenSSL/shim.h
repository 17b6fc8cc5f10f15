// COpenSSL: the part of OpenSSL's libcrypto (Debian's libssl3) that ProximityTrust uses:
// RAND_bytes, AES-128 on one block and AES-256-GCM (EVP_CIPHER_CTX), HKDF-SHA256 (EVP_PKEY_CTX)
// and HMAC-SHA256. Only ProximityTrust imports this module; it is never part of the public surface.
#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>

// EVP_CIPHER_CTX_ctrl's commands for GCM, re-declared as plain ints for Swift.
static const int COPENSSL_GCM_SET_IVLEN = EVP_CTRL_GCM_SET_IVLEN;
static const int COPENSSL_GCM_GET_TAG = EVP_CTRL_GCM_GET_TAG;
static const int COPENSSL_GCM_SET_TAG = EVP_CTRL_GCM_SET_TAG;
static const int COPENSSL_PKEY_HKDF = EVP_PKEY_HKDF;

#endif
