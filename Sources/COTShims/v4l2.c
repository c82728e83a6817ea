#include "ot_shims_v4l2.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>

static int xioctl(int fd, unsigned long request, void *arg) {
    int r;
    do { r = ioctl(fd, request, arg); } while (r == -1 && errno == EINTR);
    return r == -1 ? errno : 0;
}

int otshim_v4l2_open(const char *path) { return open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC); }
int otshim_v4l2_querycap(int fd, struct v4l2_capability *cap) { return xioctl(fd, VIDIOC_QUERYCAP, cap); }
int otshim_v4l2_enum_fmt(int fd, struct v4l2_fmtdesc *desc) { return xioctl(fd, VIDIOC_ENUM_FMT, desc); }
int otshim_v4l2_enum_framesizes(int fd, struct v4l2_frmsizeenum *size) { return xioctl(fd, VIDIOC_ENUM_FRAMESIZES, size); }
int otshim_v4l2_enum_frameintervals(int fd, struct v4l2_frmivalenum *interval) {
    return xioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, interval);
}
int otshim_v4l2_s_fmt(int fd, struct v4l2_format *format) { return xioctl(fd, VIDIOC_S_FMT, format); }
int otshim_v4l2_s_parm(int fd, struct v4l2_streamparm *parm) { return xioctl(fd, VIDIOC_S_PARM, parm); }
int otshim_v4l2_reqbufs(int fd, struct v4l2_requestbuffers *request) { return xioctl(fd, VIDIOC_REQBUFS, request); }
int otshim_v4l2_querybuf(int fd, struct v4l2_buffer *buffer) { return xioctl(fd, VIDIOC_QUERYBUF, buffer); }
int otshim_v4l2_qbuf(int fd, struct v4l2_buffer *buffer) { return xioctl(fd, VIDIOC_QBUF, buffer); }
int otshim_v4l2_dqbuf(int fd, struct v4l2_buffer *buffer) { return xioctl(fd, VIDIOC_DQBUF, buffer); }
int otshim_v4l2_stream(int fd, int on) {
    int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    return xioctl(fd, on ? VIDIOC_STREAMON : VIDIOC_STREAMOFF, &type);
}
unsigned int otshim_v4l2_fourcc(char a, char b, char c, char d) { return v4l2_fourcc(a, b, c, d); }
