#include "ot_shims_codec.h"
#include <string.h>

int otshim_opus_encoder_set(OpusEncoder *enc, int request, int value) { return opus_encoder_ctl(enc, request, value); }
int otshim_opus_encoder_get(OpusEncoder *enc, int request, int *out) { return opus_encoder_ctl(enc, request, out); }
int otshim_opus_decoder_get(OpusDecoder *dec, int request, int *out) { return opus_decoder_ctl(dec, request, out); }
vpx_codec_err_t otshim_vpx_control_int(vpx_codec_ctx_t *ctx, int id, int value) { return vpx_codec_control_(ctx, id, value); }
vpx_codec_err_t otshim_vpx_frame_corrupted(vpx_codec_ctx_t *ctx, int *out) { return vpx_codec_control_(ctx, VP8D_GET_FRAME_CORRUPTED, out); }
vpx_codec_err_t otshim_vpx_enc_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_enc_cfg_t *cfg,
                                    vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, iface, cfg, flags);
}
vpx_codec_err_t otshim_vpx_dec_init(vpx_codec_ctx_t *ctx, vpx_codec_iface_t *iface, const vpx_codec_dec_cfg_t *cfg,
                                    vpx_codec_flags_t flags) {
    return vpx_codec_dec_init(ctx, iface, cfg, flags);
}
vpx_codec_iface_t *otshim_vpx_vp8_cx(void) { return vpx_codec_vp8_cx(); }
vpx_codec_iface_t *otshim_vpx_vp8_dx(void) { return vpx_codec_vp8_dx(); }
vpx_codec_iface_t *otshim_vpx_vp9_cx(void) { return vpx_codec_vp9_cx(); }
vpx_codec_iface_t *otshim_vpx_vp9_dx(void) { return vpx_codec_vp9_dx(); }
int otshim_opus_decoder_set(OpusDecoder *dec, int request, int value) { return opus_decoder_ctl(dec, request, value); }

void otshim_vpx_image_wrap_i420(vpx_image_t *img, unsigned int width, unsigned int height,
                            unsigned char *y, unsigned char *u, unsigned char *v,
                            int stride_y, int stride_u, int stride_v) {
    memset(img, 0, sizeof(*img));
    img->fmt = VPX_IMG_FMT_I420;
    img->cs = VPX_CS_BT_601;
    img->range = VPX_CR_STUDIO_RANGE;
    img->w = img->d_w = width;
    img->h = img->d_h = height;
    img->x_chroma_shift = 1;
    img->y_chroma_shift = 1;
    img->bps = 12;
    img->planes[VPX_PLANE_Y] = y;
    img->planes[VPX_PLANE_U] = u;
    img->planes[VPX_PLANE_V] = v;
    img->stride[VPX_PLANE_Y] = stride_y;
    img->stride[VPX_PLANE_U] = stride_u;
    img->stride[VPX_PLANE_V] = stride_v;
}

void otshim_vpx_cfg_set_temporal_layers(vpx_codec_enc_cfg_t *cfg, unsigned int layers,
                                    const unsigned int *cumulative_bitrates_kbps, const unsigned int *rate_decimators,
                                    unsigned int periodicity, const unsigned int *layer_ids) {
    if (layers > VPX_TS_MAX_LAYERS) layers = VPX_TS_MAX_LAYERS;
    if (periodicity > VPX_TS_MAX_PERIODICITY) periodicity = VPX_TS_MAX_PERIODICITY;
    cfg->ts_number_layers = layers;
    for (unsigned int i = 0; i < layers; i++) {
        cfg->ts_target_bitrate[i] = cumulative_bitrates_kbps[i];
        cfg->ts_rate_decimator[i] = rate_decimators[i];
    }
    cfg->ts_periodicity = periodicity;
    for (unsigned int i = 0; i < periodicity; i++) cfg->ts_layer_id[i] = layer_ids[i];
}

int otshim_vpx_next_frame(vpx_codec_ctx_t *ctx, vpx_codec_iter_t *iter, const void **data, size_t *size,
                      vpx_codec_frame_flags_t *flags, vpx_codec_pts_t *pts) {
    const vpx_codec_cx_pkt_t *pkt;
    while ((pkt = vpx_codec_get_cx_data(ctx, iter)) != NULL) {
        if (pkt->kind != VPX_CODEC_CX_FRAME_PKT) continue;
        *data = pkt->data.frame.buf;
        *size = pkt->data.frame.sz;
        *flags = pkt->data.frame.flags;
        *pts = pkt->data.frame.pts;
        return 1;
    }
    return 0;
}
