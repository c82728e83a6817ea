/* Non-variadic wrappers of opus_encoder_ctl / opus_decoder_ctl / vpx_codec_control. */
#ifndef OT_SHIMS_CODEC_H
#define OT_SHIMS_CODEC_H
#include <opus/opus.h>
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

/** opus_encoder_ctl(enc, request, value) for the integer-setting requests (OPUS_SET_*). */
int otshim_opus_encoder_set(OpusEncoder *enc, int request, int value);
/** opus_encoder_ctl(enc, request, &out) for the integer-getting requests (OPUS_GET_*). */
int otshim_opus_encoder_get(OpusEncoder *enc, int request, int *out);
/** opus_decoder_ctl(dec, request, &out) for the integer-getting requests (OPUS_GET_*). */
int otshim_opus_decoder_get(OpusDecoder *dec, int request, int *out);
/** vpx_codec_control(ctx, id, value) for integer controls (VP8E_SET_*). */
vpx_codec_err_t otshim_vpx_control_int(vpx_codec_ctx_t *ctx, int id, int value);
/** vpx_codec_control(ctx, VP8D_GET_FRAME_CORRUPTED, &out). */
vpx_codec_err_t otshim_vpx_frame_corrupted(vpx_codec_ctx_t *ctx, int *out);
/** vpx_codec_enc_init / vpx_codec_dec_init (macros over *_ver functions) for an interface below. */
vpx_codec_err_t otshim_vpx_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_enc_cfg_t *cfg,
                                    vpx_codec_flags_t flags);
vpx_codec_err_t otshim_vpx_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_dec_cfg_t *cfg,
                                    vpx_codec_flags_t flags);
/** The VP8 and VP9 encoder and decoder interfaces. */
vpx_codec_iface_t *otshim_vpx_vp8_cx(void);
vpx_codec_iface_t *otshim_vpx_vp8_dx(void);
vpx_codec_iface_t *otshim_vpx_vp9_cx(void);
vpx_codec_iface_t *otshim_vpx_vp9_dx(void);
/** Points `img` at three caller-owned I420 planes (no copy). */
void otshim_vpx_image_wrap_i420(vpx_image_t *img, unsigned int width, unsigned int height,
                            unsigned char *y, unsigned char *u, unsigned char *v,
                            int stride_y, int stride_u, int stride_v);
/** Sets the temporal-layer fields of an encoder configuration (arrays of `layers` and `periodicity` entries). */
void otshim_vpx_cfg_set_temporal_layers(vpx_codec_enc_cfg_t *cfg, unsigned int layers,
                                    const unsigned int *cumulative_bitrates_kbps, const unsigned int *rate_decimators,
                                    unsigned int periodicity, const unsigned int *layer_ids);
/** The next compressed frame from vpx_codec_get_cx_data, skipping other packet kinds.
    Returns 1 and fills data/size/flags/pts, or 0 when there are no more. */
int otshim_vpx_next_frame(vpx_codec_ctx_t *ctx, vpx_codec_iter_t *iter, const void **data, size_t *size,
                      vpx_codec_frame_flags_t *flags, vpx_codec_pts_t *pts);
/** opus_decoder_ctl(dec, request, value) for the integer-setting requests. */
int otshim_opus_decoder_set(OpusDecoder *dec, int request, int value);
#endif
