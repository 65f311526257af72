#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <string.h>
#include <stdlib.h>
#include <errno.h>
#include <sys/stat.h>
static void st(fuse_ino_t ino, struct stat *s){ memset(s,0,sizeof *s); s->st_ino=ino; if(ino==1){s->st_mode=S_IFDIR|0755;s->st_nlink=2;} else {s->st_mode=S_IFREG|0644;s->st_nlink=1;} }
static void lk(fuse_req_t req, fuse_ino_t parent, const char *name){
  if(parent!=1||strcmp(name,"f")){fuse_reply_err(req,ENOENT);return;}
  struct fuse_entry_param e; memset(&e,0,sizeof e); e.ino=2; st(2,&e.attr); e.attr_timeout=0; e.entry_timeout=0; fuse_reply_entry(req,&e);}
static void ga(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi){ struct stat s; st(ino,&s); fuse_reply_attr(req,&s,0);}
static void op(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi){ fuse_reply_open(req,fi);}
static void rl(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi){ fuse_reply_err(req,0);}
static const struct fuse_lowlevel_ops ops={.lookup=lk,.getattr=ga,.open=op,.release=rl};
int main(int argc,char**argv){
  struct fuse_args args=FUSE_ARGS_INIT(argc-1,argv); char*mnt=argv[argc-1];
  struct fuse_session*se=fuse_session_new(&args,&ops,sizeof ops,NULL);
  if(!se||fuse_session_mount(se,mnt))return 1;
  struct fuse_loop_config *cfg=fuse_loop_cfg_create(); fuse_loop_cfg_set_max_threads(cfg,10);
  int r = getenv("SINGLE") ? fuse_session_loop(se) : fuse_session_loop_mt(se,cfg);
  fuse_session_unmount(se); return r;}
