"""The style sheet and the one script of the HTML report, inlined into every report (no network, no files).

The script draws the GPU timeline on a canvas from the JSON in ``<script id="tl-data">`` (one lane per rank and
stream; starts delta-encoded in ns from the window's start) and makes it zoomable: mouse wheel or the + / −
buttons zoom around the pointer or the centre, dragging pans, "whole step" resets. The shown window is kept
in the canvas's ``data-view-start`` / ``data-view-end`` attributes (ns from the step's start).
"""

STYLE = r"""
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:980px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc;padding-bottom:3px}
h3{font-size:15px;margin:16px 0 4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{padding:2px 8px;border-bottom:1px solid #e4e4e4;text-align:right}
th{background:#f3f3f3}td.t,th.t{text-align:left}td.t{max-width:560px;overflow-wrap:anywhere}
.facts td{text-align:left}.facts td:first-child{font-weight:600}
.finding{margin:2px 0}.sev-error{color:#a00;font-weight:600}.sev-warning{color:#a60}
.note{color:#555;font-size:12.5px;margin:2px 0}
.plot{display:block;max-width:100%;height:auto;margin:4px 0}
.plot text{font-size:11px;fill:#222}.plot text.in{fill:#111;font-size:10.5px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
.plot .mark:hover{opacity:.75}
nav a{margin-right:10px}
#tl-wrap{position:relative;border:1px solid #ccc}
#tl-canvas{display:block;width:100%;cursor:grab}
#tl-tip{position:absolute;pointer-events:none;background:#fffde8;border:1px solid #999;padding:2px 6px;font-size:12px;display:none;max-width:480px}
.tl-bar button{font-size:13px;margin-right:4px}
.key span{display:inline-block;margin-right:12px}.key i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px;border:1px solid #333}
@media print{nav,.tl-bar{display:none}body{max-width:none}h2{page-break-after:avoid}section{page-break-inside:avoid}}
"""

SCRIPT = r"""
(function(){
  var src=document.getElementById('tl-data');
  if(!src)return;
  var D=JSON.parse(src.textContent);
  var n=D.lane.length, S=new Float64Array(n), acc=0, i;
  for(i=0;i<n;i++){acc+=D.s[i];S[i]=acc;}
  var NL=D.lanes.length, first=new Int32Array(NL+1), maxDur=new Float64Array(NL);
  for(i=0;i<=NL;i++)first[i]=n;
  for(i=n-1;i>=0;i--){first[D.lane[i]]=i;if(D.d[i]>maxDur[D.lane[i]])maxDur[D.lane[i]]=D.d[i];}
  for(i=NL-1;i>=0;i--){if(first[i]>first[i+1])first[i]=first[i+1];}
  var COL=D.colours, LET=D.letters;
  var cv=document.getElementById('tl-canvas'), ctx=cv.getContext('2d'), tip=document.getElementById('tl-tip');
  var info=document.getElementById('tl-window');
  var LH=18, LEFT=150, TOP=24, W=0, H=TOP+NL*LH+6;
  var v0=0, v1=Math.max(D.span,1);
  function size(){var r=window.devicePixelRatio||1;W=cv.clientWidth||900;cv.width=W*r;cv.height=H*r;
    cv.style.height=H+'px';ctx.setTransform(r,0,0,r,0,0);}
  function lo(l,t){var a=first[l],b=first[l+1];while(a<b){var m=(a+b)>>1;if(S[m]<t)a=m+1;else b=m;}return a;}
  function fmtT(ns){var a=Math.abs(ns);if(a>=1e6)return (ns/1e6).toFixed(a>=1e8?0:2)+' ms';if(a>=1e3)return (ns/1e3).toFixed(1)+' us';return ns.toFixed(0)+' ns';}
  function draw(){
    var k=(W-LEFT-8)/(v1-v0);
    ctx.clearRect(0,0,W,H);ctx.font='11px sans-serif';ctx.textBaseline='middle';
    var step=Math.pow(10,Math.floor(Math.log10((v1-v0)/6))), t;
    if((v1-v0)/step>12)step*=2;
    ctx.fillStyle='#444';ctx.strokeStyle='#e6e6e6';
    for(t=Math.ceil(v0/step)*step;t<=v1;t+=step){var x=LEFT+(t-v0)*k;ctx.beginPath();ctx.moveTo(x,TOP-4);ctx.lineTo(x,H);ctx.stroke();ctx.fillText(fmtT(t),x+2,10);}
    for(var l=0;l<NL;l++){
      var y=TOP+l*LH;ctx.fillStyle=l%2?'#fafafa':'#f2f2f2';ctx.fillRect(LEFT,y,W-LEFT,LH-2);
      ctx.fillStyle='#222';ctx.fillText(D.lanes[l],4,y+LH/2-1);
      var e=first[l+1], j=lo(l,v0-maxDur[l]), lastX=-1;
      for(;j<e&&S[j]<=v1;j++){
        var s=S[j], d=D.d[j]; if(s+d<v0)continue;
        var x0=LEFT+Math.max(s-v0,0)*k, x1=LEFT+Math.min(s+d-v0,v1-v0)*k, w=x1-x0;
        if(w<1){if(Math.floor(x0)===lastX)continue;lastX=Math.floor(x0);w=1;}
        ctx.fillStyle=COL[D.k[j]];ctx.fillRect(x0,y+1,w,LH-4);
        if(w>14){ctx.fillStyle='#fff';ctx.fillText(w>60?(LET[D.k[j]]+' '+D.names[D.n[j]]).slice(0,Math.floor(w/6)):LET[D.k[j]],x0+2,y+LH/2-1);}
      }
    }
    cv.setAttribute('data-view-start',String(Math.round(v0)));cv.setAttribute('data-view-end',String(Math.round(v1)));
    if(info)info.textContent='showing '+fmtT(v0)+' to '+fmtT(v1)+' of the step ('+fmtT(v1-v0)+')';
  }
  function zoom(f,c){var span=D.span||1;if(c===undefined)c=(v0+v1)/2;var w=Math.min(Math.max((v1-v0)*f,1000),span);
    var a=c-(c-v0)*(w/(v1-v0));a=Math.max(0,Math.min(a,span-w));v0=a;v1=a+w;draw();}
  function tAt(px){return v0+(px-LEFT)*(v1-v0)/(W-LEFT-8);}
  cv.addEventListener('wheel',function(ev){ev.preventDefault();var r=cv.getBoundingClientRect();zoom(ev.deltaY<0?0.7:1/0.7,tAt(ev.clientX-r.left));},{passive:false});
  var drag=null;
  cv.addEventListener('mousedown',function(ev){drag={x:ev.clientX,a:v0,b:v1};cv.style.cursor='grabbing';});
  window.addEventListener('mouseup',function(){drag=null;cv.style.cursor='grab';});
  cv.addEventListener('mousemove',function(ev){
    var r=cv.getBoundingClientRect(), px=ev.clientX-r.left, py=ev.clientY-r.top;
    if(drag){var dt=(drag.x-ev.clientX)*(drag.b-drag.a)/(W-LEFT-8), span=D.span||1, w=drag.b-drag.a;
      var a=Math.max(0,Math.min(drag.a+dt,span-w));v0=a;v1=a+w;draw();return;}
    var l=Math.floor((py-TOP)/LH), t=tAt(px), hit=-1;
    if(l>=0&&l<NL&&px>LEFT){var tol=3*(v1-v0)/(W-LEFT-8);for(var j=lo(l,t-maxDur[l]-tol);j<first[l+1]&&S[j]<=t+tol;j++){if(S[j]+D.d[j]>=t-tol){hit=j;}}}
    if(hit<0){tip.style.display='none';return;}
    tip.textContent=D.lanes[l]+' | '+D.types[D.k[hit]]+' | '+D.names[D.n[hit]]+' | start '+fmtT(S[hit])+', '+fmtT(D.d[hit]);
    tip.style.left=Math.min(px+12,W-300)+'px';tip.style.top=(py+14)+'px';tip.style.display='block';
  });
  cv.addEventListener('mouseleave',function(){tip.style.display='none';});
  document.getElementById('tl-in').onclick=function(){zoom(0.5);};
  document.getElementById('tl-out').onclick=function(){zoom(2);};
  document.getElementById('tl-reset').onclick=function(){v0=0;v1=Math.max(D.span,1);draw();};
  window.addEventListener('resize',function(){size();draw();});
  window.holotraceTimeline={zoom:zoom,view:function(){return [v0,v1];}};
  size();draw();
})();
"""
